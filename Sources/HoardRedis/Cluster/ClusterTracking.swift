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
/// Events reach the subscriber one at a time (under one lock, whichever primary's thread brings
/// them), in each primary's order.
final class ClusterTracking: InvalidationSubscription, @unchecked Sendable {
    // Safe because the mutable state is only touched while holding `lock`, and the rest is set in
    // `init`.
    typealias Endpoint = RedisCacheLevel.Configuration.Endpoint

    private struct Node {
        var subscription: (any InvalidationSubscription)?
        var isTracking = false
    }

    private let router: ClusterRouter
    private let namespace: String
    private let handler: @Sendable (CacheInvalidation) -> Void
    /// Serializes the subscriber's events and guards the fields below.
    private let lock = NSLock()
    private var nodes: [Endpoint: Node] = [:]
    /// Whether the subscriber was last told `tracking`.
    private var isTracking = false
    private var isCancelled = false
    private var stopObserving: (@Sendable () -> Void)?
    /// Where subscriptions for new primaries are made, one at a time, off the I/O threads.
    private let queue = DispatchQueue(label: "Hoard Redis cluster tracking")

    private init(router: ClusterRouter, namespace: String, handler: @escaping @Sendable (CacheInvalidation) -> Void) {
        self.router = router
        self.namespace = namespace
        self.handler = handler
    }

    /// Subscribes `handler` to the namespace's invalidations on every primary of the cluster,
    /// waiting (at most the connect and command timeouts) for the map and for each primary's first
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
        let known = Locked<ClusterTopology?>(nil)
        let stop = router.observeTopology { [weak tracking] topology in
            known.withLock { $0 = topology }
            first.semaphore.signal()
            guard let tracking else { return }
            tracking.queue.async { tracking.follow(topology) }
        }
        tracking.lock.withLock { tracking.stopObserving = stop }
        let wait = router.configuration.connectTimeout + router.configuration.commandTimeout
        let seconds = Double(wait.components.seconds) + Double(wait.components.attoseconds) * 1e-18
        _ = first.semaphore.wait(timeout: .now() + seconds)
        // A cluster that cannot be reached yet is no error: the subscriber hears `tracking` once it
        // can, as for one server. One that can is tracked before this returns, and a primary that
        // refuses to track throws.
        if let topology = known.withLock({ $0 }) {
            try tracking.queue.sync { try tracking.follow(topology, throwing: true) }
        }
        tracking.askForTheMapEverySecond()
        return tracking
    }

    func cancel() {
        let (subscriptions, stop) = lock.withLock { () -> ([any InvalidationSubscription], (@Sendable () -> Void)?) in
            isCancelled = true
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

    /// Tracks the primaries of `topology` and no others (on ``queue``).
    private func follow(_ topology: ClusterTopology) {
        do {
            try follow(topology, throwing: false)
        } catch {
            HoardLogger.log(.warning, "Redis: tracking a primary of \(router.configuration.server) failed: \(error)")
        }
    }

    private func follow(_ topology: ClusterTopology, throwing: Bool) throws {
        let primaries = Set(topology.shards.map(\.primary))
        let (added, removed) = lock.withLock { () -> ([Endpoint], [any InvalidationSubscription]) in
            guard !isCancelled else { return ([], []) }
            var removed: [any InvalidationSubscription] = []
            for endpoint in nodes.keys where !primaries.contains(endpoint) {
                if let subscription = nodes.removeValue(forKey: endpoint)?.subscription {
                    removed.append(subscription)
                }
            }
            let added = primaries.filter { nodes[$0]?.subscription == nil }.sorted { $0.description < $1.description }
            for endpoint in added where nodes[endpoint] == nil { nodes[endpoint] = Node() }
            if !added.isEmpty {
                let names = added.map(\.description).joined(separator: ", ")
                lose("the cluster has primaries that were not tracked yet: \(names)")
            } else {
                confirmIfEveryNodeTracks()
            }
            return (added, removed)
        }
        for subscription in removed { subscription.cancel() }
        for endpoint in added {
            let subscription: any InvalidationSubscription
            do {
                subscription = try TrackingHub.subscribe(router.configuration(for: endpoint), namespace: namespace) {
                    [weak self] event in
                    self?.receive(event, from: endpoint)
                }
            } catch {
                if throwing { throw error }
                HoardLogger.log(.warning, "Redis: tracking the primary \(endpoint) failed: \(error)")
                continue
            }
            let kept = lock.withLock { () -> Bool in
                guard !isCancelled, nodes[endpoint] != nil else { return false }
                nodes[endpoint]?.subscription = subscription
                return true
            }
            if !kept { subscription.cancel() }
        }
    }

    /// One primary's event, told on as the cluster's.
    private func receive(_ event: CacheInvalidation, from endpoint: Endpoint) {
        let lost = lock.withLock { () -> Bool in
            guard !isCancelled, nodes[endpoint] != nil else { return false }
            switch event {
            case .keys:
                handler(event)
                return false
            case .all(let reason):
                nodes[endpoint]?.isTracking = false
                lose(reason)
                return true
            case .tracking:
                nodes[endpoint]?.isTracking = true
                confirmIfEveryNodeTracks()
                return false
            }
        }
        if lost { router.requestRefresh() }
    }

    /// Tells the subscriber that copies may be stale, unless it was told so last (holding `lock`).
    private func lose(_ reason: String) {
        guard isTracking else { return }
        isTracking = false
        handler(.all(reason: reason))
    }

    /// Tells the subscriber `tracking` when every primary tracks and it was not told so last
    /// (holding `lock`).
    private func confirmIfEveryNodeTracks() {
        guard !isTracking, !nodes.isEmpty, nodes.values.allSatisfy(\.isTracking) else { return }
        isTracking = true
        handler(.tracking)
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
