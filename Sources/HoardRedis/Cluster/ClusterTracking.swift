import Foundation
import Hoard

/// The invalidations of a namespace on a Redis Cluster: one tracking connection per primary (each a
/// ``TrackingHub`` subscription, `CLIENT TRACKING ON BCAST PREFIX`), told to one subscriber as if
/// they came from one server.
///
/// The subscriber hears ``CacheInvalidation/tracking`` only while every primary of the map tracks:
/// a primary whose tracking connection is lost, and a primary the map names for the first time (a
/// replica promoted in a failover, a node given slots), make ``CacheInvalidation/all(reason:)``
/// first, since a change on it may have gone unannounced, and ``CacheInvalidation/tracking`` comes
/// once it tracks. The map is asked for every second, so that a failed or demoted primary's
/// successor is found without waiting for the refresh interval.
///
/// A key moved to another primary (a resharding) is announced by both: its removal from the source
/// and its arrival on the target. A primary demoted to replica announces nothing of what it
/// replicates: the map, asked every second, moves tracking to its successor.
///
/// Events reach the subscriber one at a time, in each primary's order: they are queued under a
/// lock and told, outside it, by whichever thread finds nobody telling them (so a subscriber may
/// cancel, or be released, from its handler).
///
/// `tracking` is told only when the latest map has an owner for every slot and every primary it
/// names (slot owners and primaries without slots yet alike: a node added to the cluster and
/// about to receive slots is tracked before they move) has a tracking connection that tracks.
final class ClusterTracking: InvalidationSubscription, @unchecked Sendable {
    // Safe because the mutable state is only touched while holding `lock`, and the rest is set in
    // `init`.
    typealias Endpoint = RedisCacheLevel.Configuration.Endpoint

    private struct Node {
        var subscription: (any InvalidationSubscription)?
        var isTracking = false
        /// Which subscription of this primary's this is: events of an earlier one, cancelled when the
        /// primary left the map, do not count for this one.
        let generation: UInt64
    }

    private let router: ClusterRouter
    private let namespace: String
    private let handler: @Sendable (CacheInvalidation) -> Void
    /// Guards the fields below.
    private let lock = NSLock()
    private var nodes: [Endpoint: Node] = [:]
    private var nextGeneration: UInt64 = 0
    /// Whether the subscriber was last told `tracking`.
    private var isTracking = false
    private var isCancelled = false
    private var stopObserving: (@Sendable () -> Void)?
    /// Events not told yet, oldest first, and whether a thread is telling them.
    private var pending = FrontQueue<CacheInvalidation>()
    private var isTelling = false
    /// Where subscriptions for new primaries are made, one at a time, off the I/O threads.
    private let queue = DispatchQueue(label: "Hoard Redis cluster tracking")

    private init(router: ClusterRouter, namespace: String, handler: @escaping @Sendable (CacheInvalidation) -> Void) {
        self.router = router
        self.namespace = namespace
        self.handler = handler
    }

    /// Subscribes `handler` to the namespace's invalidations on every primary of the cluster,
    /// waiting (at most the connect and command timeouts) for the map, then for each primary's first
    /// answer.
    ///
    /// - Throws: `CacheError` with code `invalidConfiguration` when a primary cannot track.
    static func subscribe(
        _ router: ClusterRouter,
        namespace: String,
        handler: @escaping @Sendable (CacheInvalidation) -> Void
    ) throws -> ClusterTracking {
        router.readFromPrimaries()
        let tracking = ClusterTracking(router: router, namespace: namespace, handler: handler)
        let first = DispatchSemaphoreBox()
        let stop = router.observeTopology { [weak tracking] _ in
            first.semaphore.signal()
            guard let tracking else { return }
            tracking.queue.async { tracking.follow() }
        }
        tracking.lock.withLock { tracking.stopObserving = stop }
        let wait = router.configuration.connectTimeout + router.configuration.commandTimeout
        let seconds = Double(wait.components.seconds) + Double(wait.components.attoseconds) * 1e-18
        _ = first.semaphore.wait(timeout: .now() + seconds)
        // A cluster that cannot be reached yet is no error: the subscriber hears `tracking` once it
        // can, as for one server. One that can is tracked before this returns, and a primary that
        // refuses to track throws.
        if router.topology != nil {
            try tracking.queue.sync { try tracking.follow(throwing: true) }
        }
        tracking.askForTheMapEverySecond()
        return tracking
    }

    /// What each primary's tracking is doing, and the map's, for a test's failure message.
    var stateDescription: String {
        let (nodes, isTracking, pending, isTelling) = lock.withLock {
            (self.nodes, self.isTracking, self.pending.count, self.isTelling)
        }
        let map = router.topology
        let described = nodes.sorted { $0.key.description < $1.key.description }.map { endpoint, node in
            "\(endpoint) tracks \(node.isTracking), subscribed \(node.subscription != nil), generation \(node.generation)"
        }
        return "tracking \(isTracking), \(pending) pending, telling \(isTelling); nodes: "
            + described.joined(separator: "; ") + "; map: \(map?.primaries.map(\.description) ?? []), owned slots "
            + "\(map?.ownedSlots ?? 0); \(router.refreshDescription)"
    }

    func cancel() {
        let (subscriptions, stop) = lock.withLock { () -> ([any InvalidationSubscription], (@Sendable () -> Void)?) in
            isCancelled = true
            pending.removeAll()
            defer {
                nodes = [:]
                stopObserving = nil
            }
            return (nodes.values.compactMap(\.subscription), stopObserving)
        }
        stop?()
        for subscription in subscriptions { subscription.cancel() }
    }

    deinit { cancel() }

    /// Tracks the primaries of the router's latest map and no others (on ``queue``).
    ///
    /// The latest map, not the one an observer was told: two refreshes may tell their maps out of
    /// order, and a later call must never go back to an older map.
    private func follow() {
        do {
            try follow(throwing: false)
        } catch {
            HoardLogger.log(.warning, "Redis: tracking a primary of \(router.configuration.server) failed: \(error)")
        }
    }

    private func follow(throwing: Bool) throws {
        guard let topology = router.topology else { return }
        let primaries = Set(topology.primaries)
        let (added, removed) = lock.withLock { () -> ([(Endpoint, UInt64)], [any InvalidationSubscription]) in
            guard !isCancelled else { return ([], []) }
            var removed: [any InvalidationSubscription] = []
            for endpoint in nodes.keys where !primaries.contains(endpoint) {
                if let subscription = nodes.removeValue(forKey: endpoint)?.subscription {
                    removed.append(subscription)
                }
            }
            var added: [(Endpoint, UInt64)] = []
            for endpoint in primaries.sorted(by: { $0.description < $1.description })
            where nodes[endpoint]?.subscription == nil {
                if nodes[endpoint] == nil {
                    nextGeneration += 1
                    nodes[endpoint] = Node(generation: nextGeneration)
                }
                added.append((endpoint, nodes[endpoint]?.generation ?? 0))
            }
            if !added.isEmpty {
                let names = added.map(\.0.description).joined(separator: ", ")
                lose("the cluster has primaries that were not tracked yet: \(names)")
            } else {
                confirmIfEveryNodeTracks(topology)
            }
            return (added, removed)
        }
        tellPending()
        for subscription in removed { subscription.cancel() }
        for (endpoint, generation) in added {
            let subscription: any InvalidationSubscription
            do {
                subscription = try TrackingHub.subscribe(router.configuration(for: endpoint), namespace: namespace) {
                    [weak self] event in
                    self?.receive(event, from: endpoint, generation: generation)
                }
            } catch {
                if throwing { throw error }
                HoardLogger.log(.warning, "Redis: tracking the primary \(endpoint) failed: \(error)")
                continue
            }
            let kept = lock.withLock { () -> Bool in
                guard !isCancelled, nodes[endpoint]?.generation == generation else { return false }
                nodes[endpoint]?.subscription = subscription
                return true
            }
            if !kept { subscription.cancel() }
        }
    }

    /// One primary's event, told on as the cluster's.
    ///
    /// Keys are told whoever announced them, even a primary that just left the map (its last
    /// changes are still changes); only the current subscription of a primary in the map moves
    /// whether the cluster tracks.
    private func receive(_ event: CacheInvalidation, from endpoint: Endpoint, generation: UInt64) {
        let lost = lock.withLock { () -> Bool in
            guard !isCancelled else { return false }
            if case .keys = event {
                pending.append(event)
                return false
            }
            guard nodes[endpoint]?.generation == generation else { return false }
            switch event {
            case .keys:
                return false
            case .all(let reason):
                nodes[endpoint]?.isTracking = false
                lose(reason)
                return true
            case .tracking:
                nodes[endpoint]?.isTracking = true
                if let topology = router.topology { confirmIfEveryNodeTracks(topology) }
                return false
            }
        }
        tellPending()
        if lost { router.requestRefresh() }
    }

    /// Queues `all` for the subscriber, unless it was told so last (holding `lock`).
    private func lose(_ reason: String) {
        guard isTracking else { return }
        isTracking = false
        pending.append(.all(reason: reason))
    }

    /// Queues `tracking` when `topology` has an owner for every slot and every primary of it
    /// tracks, unless the subscriber was told so last (holding `lock`).
    private func confirmIfEveryNodeTracks(_ topology: ClusterTopology) {
        guard !isTracking, topology.ownedSlots == ClusterSlot.count, !nodes.isEmpty,
            topology.primaries.allSatisfy({ nodes[$0]?.isTracking == true })
        else { return }
        isTracking = true
        pending.append(.tracking)
    }

    /// Tells the queued events, one at a time, outside the lock, unless another thread is telling
    /// them already (it tells these too).
    private func tellPending() {
        let tells = lock.withLock { () -> Bool in
            guard !isTelling, !pending.isEmpty else { return false }
            isTelling = true
            return true
        }
        guard tells else { return }
        while true {
            let next = lock.withLock { () -> CacheInvalidation? in
                guard !isCancelled, !pending.isEmpty else {
                    isTelling = false
                    return nil
                }
                return pending.popFirst()
            }
            guard let next else { return }
            handler(next)
        }
    }

    /// Asks for the map every second, for as long as the subscription lives.
    ///
    /// A primary demoted by a manual failover keeps its clients, the tracking connection included,
    /// and announces nothing of what it then replicates: only the map says that another node took
    /// its slots. Asking every second bounds how long a copy of one of them may outlive a change
    /// there (one `CLUSTER SHARDS` a second per level; the data commands' redirections usually
    /// tell sooner).
    private func askForTheMapEverySecond() {
        queue.asyncAfter(deadline: .now() + 1) { [weak self] in
            guard let self else { return }
            guard !lock.withLock({ isCancelled }) else { return }
            router.requestRefresh()
            askForTheMapEverySecond()
        }
    }
}
