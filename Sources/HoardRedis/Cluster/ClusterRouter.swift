import Foundation
import Hoard

/// The connections of a level on a Redis Cluster: a pool per node, the map of which primary owns
/// each slot, and the following of `MOVED` and `ASK` redirections.
///
/// The map is asked of the cluster (``ClusterTopology``) in the background: at the first call, after
/// a redirection or a failure, when it is older than the refresh interval, and every
/// ``unownedSlotWatchInterval`` while it leaves slots without a primary. One refresh runs at a
/// time; a request for another while it runs makes one more run after it. Callers that need a map
/// before there is one wait for the first refresh, within their command timeout. Pools are made for
/// nodes as they appear and kept while the router lives (a cluster has few nodes; a node that comes
/// back finds its pool).
final class ClusterRouter: Sendable {
    typealias Endpoint = RedisCacheLevel.Configuration.Endpoint

    private struct State: Sendable {
        var topology: ClusterTopology?
        var pools: [Endpoint: RedisPool] = [:]
        var isRefreshing = false
        var refreshesAgain = false
        var lastRefresh: ContinuousClock.Instant?
        var lastFailure: String?
        /// Callers waiting for the end of a refresh, each resumed once: by the refresh, its deadline
        /// or its cancellation, whichever comes first.
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextWaiter: UInt64 = 0
        /// Told each new map, on the thread that learned it.
        var observers: [UInt64: @Sendable (ClusterTopology) -> Void] = [:]
        var nextObserver: UInt64 = 0
        /// The pools of replicas, for reads (their connections send `READONLY`).
        var replicaPools: [Endpoint: RedisPool] = [:]
        var nextReplica = 0
        /// Whether reads stay on the primaries: coherence listens to them.
        var isTracked = false
        /// For each slot the last refreshed map leaves without a primary, when a refreshed map first
        /// did, in milliseconds since `origin`, plus one (0: the slot has a primary); `nil` while
        /// every slot has one.
        var unownedSince: [UInt64]?
        /// When the last refreshed map came, in milliseconds since `origin`.
        var mapTime: UInt64 = 0
        /// Whether a refresh is scheduled because the last map left slots without a primary (see
        /// ``ClusterRouter/unownedSlotWatchInterval``).
        var isWatchingUnownedSlots = false
        /// When the cluster first answered `CLUSTERDOWN` since it last served a write (or a command
        /// that had met the answer), and when it last did (see
        /// ``ClusterRouter/updateClusterDown(_:now:)``).
        var clusterDown = ClusterDown()
        /// How many `CLUSTERDOWN` answers came, for tests and messages.
        var clusterDownAnswers = 0
    }

    /// How long a cluster has answered `CLUSTERDOWN`, in milliseconds since `origin`.
    struct ClusterDown: Sendable, Equatable {
        /// The first such answer, plus one; 0 when the cluster serves.
        var since: UInt64 = 0
        /// The last such answer.
        var last: UInt64 = 0
    }

    /// How long the refreshed maps must show a slot without a primary before its commands fail at
    /// once instead of waiting for one: longer than a failover leaves a failed primary's slots
    /// without one (the replica's election, 0.5–1 s plus 1 s per rank after the cluster marks the
    /// primary failed).
    static let unownedSlotGrace = Duration.seconds(10)
    /// How recent the map must be for a command to fail at once on it; an older one is refreshed
    /// first (so, under load, about once per this time while a shard is lost).
    static let unownedSlotMapAge = Duration.seconds(1)
    /// The longest time between two maps for a slot's time without a primary to run on from the
    /// first to the second; after a longer gap it starts again.
    static let unownedSlotMapGap = Duration.seconds(3)
    /// How often the map is asked for while the last one leaves slots without a primary, even when
    /// no command comes: shorter than ``unownedSlotMapGap``, so that a level used rarely times a
    /// lost shard as a busy one does, and its rare commands for it fail at once after the grace
    /// instead of each waiting its whole timeout.
    static let unownedSlotWatchInterval = Duration.seconds(1)

    let configuration: RedisCacheLevel.Configuration
    private let cluster: RedisCacheLevel.Configuration.Cluster
    private let state = Locked(State())
    /// The time `State.unownedSince` counts from.
    private let origin = ContinuousClock.now

    init(_ configuration: RedisCacheLevel.Configuration) {
        precondition(configuration.cluster != nil, "a cluster router needs a cluster configuration")
        self.configuration = configuration
        cluster = configuration.cluster ?? .init(seeds: [])
        requestRefresh()
    }

    /// The configuration of a node's pool and tracking connection: the level's, at `endpoint`.
    func configuration(for endpoint: Endpoint) -> RedisCacheLevel.Configuration {
        var node = configuration
        node.cluster = nil
        node.host = endpoint.host
        node.port = endpoint.port
        return node
    }

    /// The pool of the node at `endpoint`, made when it is the first use of the node.
    ///
    /// - Throws: `CacheError` with code `io` when no connection can be opened.
    func pool(for endpoint: Endpoint) throws -> RedisPool {
        try state.withLock { state in
            if let pool = state.pools[endpoint] { return pool }
            let pool = try RedisPool(configuration(for: endpoint))
            state.pools[endpoint] = pool
            return pool
        }
    }

    /// The pool for reads from the replica at `endpoint`, made at its first use.
    private func replicaPool(for endpoint: Endpoint) throws -> RedisPool {
        try state.withLock { state in
            if let pool = state.replicaPools[endpoint] { return pool }
            var node = configuration(for: endpoint)
            node.readsAsReplica = true
            let pool = try RedisPool(node)
            state.replicaPools[endpoint] = pool
            return pool
        }
    }

    /// Keeps reads on the primaries from now on (see ``RedisCacheLevel/Configuration/Cluster/readsFromReplicas``).
    func readFromPrimaries() { state.withLock { $0.isTracked = true } }

    /// The replica a read of `slot` goes to, in turn among the shard's, or `nil` for the primary.
    private func replica(forReadOf slot: Int?) -> Endpoint? {
        guard cluster.readsFromReplicas, let slot else { return nil }
        return state.withLock { state in
            guard !state.isTracked, let replicas = state.topology?.shard(forSlot: slot)?.replicas, !replicas.isEmpty
            else { return nil }
            state.nextReplica &+= 1
            return replicas[Int(UInt(bitPattern: state.nextReplica) % UInt(replicas.count))]
        }
    }

    /// Whether a refresh runs, and how long ago the last one ended, for a test's failure message.
    var refreshDescription: String {
        state.withLock { state in
            "refreshing \(state.isRefreshing), again \(state.refreshesAgain), last refresh "
                + "\(state.lastRefresh.map { "\($0.duration(to: .now)) ago" } ?? "never"), "
                + "last failure \(state.lastFailure ?? "none")"
        }
    }

    /// The map, once the cluster gave one.
    var topology: ClusterTopology? { state.withLock { $0.topology } }

    /// Whether every primary the map names is skipped for not answering (or the map is unknown and
    /// every seed is).
    var isSkippingEveryNode: Bool {
        let pools = state.withLock { state in
            (state.topology?.shards.map(\.primary) ?? cluster.seeds).compactMap { state.pools[$0] }
        }
        return !pools.isEmpty && pools.allSatisfy(\.breaker.isOpen)
    }

    // MARK: - Sending

    /// Sends `command` to the primary that owns `slot` (any primary when `nil`), following the
    /// cluster's redirections, and returns the reply.
    ///
    /// - Parameters:
    ///   - command: The command; every key it names must be in `slot`.
    ///   - key: The caller's key, for messages.
    ///   - slot: The slot of the command's keys.
    ///   - isRead: Whether the command only reads, and may go to a replica when the configuration
    ///     asks for it.
    /// - Returns: The reply.
    /// - Throws: `CacheError` with code `network` when the node cannot answer in time or the map
    ///   cannot be had; `serverRefused` for an error reply, redirections past the limit included.
    func send(_ command: RESPCommand, key: String?, slot: Int?, isRead: Bool = false) async throws -> RESPValue {
        let deadline = ContinuousClock.now + configuration.commandTimeout
        var endpoint = try await owner(of: slot, key: key, command: command.name, deadline: deadline)
        // A replica's answer of MOVED points at the primary; the loop follows it from there.
        let primary = endpoint
        var replica = isRead ? replica(forReadOf: slot) : nil
        var asking = false
        var redirections = 0
        // A command of several keys in a slot half migrated goes back and forth between the source
        // (`ASK`) and the target (`TRYAGAIN`); past the limit, `TRYAGAIN` is what the caller can act on.
        var tryAgain: CacheError?
        // `CLUSTERDOWN` answers so far, which the redirections do not count.
        var downRounds = 0
        while true {
            let readsReplica = replica != nil
            let pool = try replica.map(replicaPool) ?? pool(for: endpoint)
            if let read = replica {
                endpoint = read
                replica = nil
            }
            do {
                let reply = try await pool.send(command, key: key, deadline: deadline, asking: asking)
                // A read may be served by a cluster down that still takes reads
                // (`cluster-allow-reads-when-down`): only a write, or a command that met the
                // cluster down, shows that it is up.
                if downRounds > 0 || (!isRead && state.withLock({ $0.clusterDown.since != 0 })) {
                    state.withLock { $0.clusterDown = ClusterDown() }
                }
                return reply
            } catch let error as CacheError {
                guard let failure = error.underlyingError as? RedisFailure else { throw error }
                if readsReplica, failure.kind != .server, failure.kind != .cancelled, failure.kind != .timeout {
                    // A replica that cannot be reached: the primary answers instead.
                    endpoint = primary
                    continue
                }
                guard failure.kind == .server, let reply = failure.reply else {
                    // The node may be down or gone: the cluster may say who serves its slots now.
                    if failure.kind != .cancelled { requestRefresh() }
                    throw error
                }
                if reply.hasPrefix("CLUSTERDOWN") {
                    // A cluster that requires every slot served refuses every key while one has no
                    // primary: for a second or two in a failover, until the replica is elected.
                    // Waited for as a slot without a primary is, unless it has lasted.
                    if let reason = lastingClusterDown(reply) {
                        throw RedisFailure(.server, reason, reply: reply)
                            .error(server: configuration.server, command: command.name, key: key)
                    }
                    // Only a command that waits asks for a map: once commands fail at once, the
                    // unowned-slot watch keeps it fresh, and a refresh each would ask every node.
                    if downRounds == 0 { requestRefresh() }
                    downRounds += 1
                    let pause = Duration.milliseconds(min(5 << min(downRounds, 5), 100))
                    // At least a pause left for the retry, so that it does not time out on a healthy
                    // node (whose circuit breaker would count it) instead of meeting the answer.
                    guard ContinuousClock.now + pause * 2 < deadline else {
                        throw RedisFailure(.server, "the cluster answered \(reply) until the deadline", reply: reply)
                            .error(server: configuration.server, command: command.name, key: key)
                    }
                    try await Task.sleep(for: pause)
                    endpoint = try await owner(of: slot, key: key, command: command.name, deadline: deadline)
                    asking = false
                    continue
                }
                guard redirections < cluster.maximumRedirections else {
                    throw ClusterRedirection(reply, from: endpoint)?.kind == .ask ? tryAgain ?? error : error
                }
                redirections += 1
                if let redirection = ClusterRedirection(reply, from: endpoint) {
                    if redirection.kind == .moved { learn(redirection) }
                    endpoint = redirection.endpoint
                    asking = redirection.kind == .ask
                } else if reply.hasPrefix("TRYAGAIN") {
                    tryAgain = error
                    // A slot half migrated for a command of several keys: a short pause, then the
                    // map as it stands.
                    requestRefresh()
                    let pause = Duration.milliseconds(5 << redirections)
                    guard ContinuousClock.now + pause < deadline else { throw error }
                    try await Task.sleep(for: pause)
                    endpoint = try await owner(of: slot, key: key, command: command.name, deadline: deadline)
                    asking = false
                } else {
                    throw error
                }
            }
        }
    }

    /// Sends `command` to one node and tells `completion` the outcome, on the node's I/O thread:
    /// the first primary of the map, or the first seed before there is one (a `PING` that checks the
    /// login).
    func sendToAnyNode(
        _ command: RESPCommand,
        deadline: ContinuousClock.Instant? = nil,
        completion: @escaping @Sendable (Result<RESPValue, any Error>) -> Void
    ) {
        let endpoint = state.withLock { $0.topology?.shards.first?.primary } ?? cluster.seeds[0]
        do {
            try pool(for: endpoint).send(command, key: nil, deadline: deadline, completion: completion)
        } catch {
            completion(.failure(error))
        }
    }

    /// The primaries of the map, waiting for one if there is none yet.
    ///
    /// - Throws: `CacheError` with code `network` when no node gave a map.
    func primaries() async throws -> [Endpoint] {
        try await currentTopology(key: nil, command: "CLUSTER SHARDS", deadline: .now + configuration.commandTimeout)
            .primaries
    }

    /// The primaries of the map, with how many slots none of them serves (a shard whose primary
    /// failed and whose replica has not taken over yet), waiting for a map if there is none yet.
    ///
    /// A map with slots that no primary serves is asked for again once, as it may date from a
    /// failover since finished.
    ///
    /// - Throws: `CacheError` with code `network` when no node gave a map.
    func primariesAndUnservedSlots() async throws -> (primaries: [Endpoint], unservedSlots: Int) {
        let deadline = ContinuousClock.now + configuration.commandTimeout
        var topology = try await currentTopology(key: nil, command: "CLUSTER SHARDS", deadline: deadline)
        if topology.ownedSlots < ClusterSlot.count {
            await nextRefresh(until: deadline)
            topology = try await currentTopology(key: nil, command: "CLUSTER SHARDS", deadline: deadline)
        }
        return (topology.primaries, ClusterSlot.count - topology.ownedSlots)
    }

    /// The primary that owns `slot` (the first primary for `nil`), waiting for a map if there is none
    /// yet, and asking for a new one when it is old.
    ///
    /// A slot without a primary in the map (a failover under way: the failed primary is out, its
    /// successor not yet in) makes it wait 20 ms and a refresh, again and again, until `deadline`;
    /// but a slot that the refreshed maps have shown without one for ``unownedSlotGrace`` (a shard
    /// lost for good) fails at once, if the last map is younger than ``unownedSlotMapAge``, so that
    /// its commands do not each wait their whole timeout.
    private func owner(
        of slot: Int?,
        key: String?,
        command: String,
        deadline: ContinuousClock.Instant
    ) async throws -> Endpoint {
        var topology = try await currentTopology(key: key, command: command, deadline: deadline)
        if let slot {
            while true {
                if let shard = topology.shard(forSlot: slot) { return shard.primary }
                if let unowned = lostSlotDuration(slot) {
                    throw RedisFailure(.connect, "no primary of the cluster has served the slot \(slot) for \(unowned)")
                        .error(server: configuration.server, command: command, key: key)
                }
                guard ContinuousClock.now + .milliseconds(20) < deadline else {
                    requestRefresh()
                    throw RedisFailure(.connect, "no primary of the cluster serves the slot \(slot)")
                        .error(server: configuration.server, command: command, key: key)
                }
                let seen = state.withLock { $0.mapTime }
                try await Task.sleep(for: .milliseconds(20))
                // A map that came meanwhile is what a refresh would give; one under way is joined,
                // not followed by another (every refresh asks every node while slots lack a primary).
                if state.withLock({ $0.mapTime }) == seen { await nextRefresh(until: deadline, joinsRunning: true) }
                topology = try await currentTopology(key: key, command: command, deadline: deadline)
            }
        }
        guard let first = topology.primaries.first else {
            throw RedisFailure(.connect, "the cluster has no primary").error(
                server: configuration.server,
                command: command,
                key: key
            )
        }
        return first
    }

    /// How long the refreshed maps have left `slot` without a primary, from the first that did to
    /// the last; `nil` when the last one gave it one.
    func unownedDuration(forSlot slot: Int) -> Duration? {
        let (since, mapTime) = state.withLock { ($0.unownedSince?[slot] ?? 0, $0.mapTime) }
        guard since != 0 else { return nil }
        return .milliseconds(mapTime + 1 - since)
    }

    /// How long the refreshed maps have left `slot` without a primary, when that is at least
    /// ``unownedSlotGrace`` and the last map is younger than ``unownedSlotMapAge``; else `nil`.
    private func lostSlotDuration(_ slot: Int) -> Duration? {
        let (since, mapTime) = state.withLock { ($0.unownedSince?[slot] ?? 0, $0.mapTime) }
        return Self.lostSlotDuration(since: since, mapTime: mapTime, now: Self.milliseconds(since: origin))
    }

    /// ``lostSlotDuration(_:)`` for a slot first left without a primary at `since` (0: it has
    /// one) by the maps, the last of which came at `mapTime`, all in milliseconds since `origin`.
    static func lostSlotDuration(since: UInt64, mapTime: UInt64, now: UInt64) -> Duration? {
        guard since != 0, now >= mapTime, Duration.milliseconds(now - mapTime) < unownedSlotMapAge else {
            return nil
        }
        let unowned = Duration.milliseconds(mapTime + 1 - since)
        return unowned >= unownedSlotGrace ? unowned : nil
    }

    /// How many `CLUSTERDOWN` answers the level's commands have had.
    var clusterDownAnswerCount: Int { state.withLock { $0.clusterDownAnswers } }

    /// Notes the answer `reply`, a `CLUSTERDOWN`, now; says why a command should fail at once when
    /// the cluster has answered so for at least ``unownedSlotGrace``, or when a fresh map has shown a
    /// slot without a primary for that long (a shard lost for good keeps a cluster that requires
    /// every slot down); else `nil`.
    private func lastingClusterDown(_ reply: String) -> String? {
        let now = Self.milliseconds(since: origin)
        let (down, since, mapTime) = state.withLock { state in
            Self.updateClusterDown(&state.clusterDown, now: now)
            state.clusterDownAnswers += 1
            return (state.clusterDown, state.unownedSince, state.mapTime)
        }
        let answered = Duration.milliseconds(down.last + 1 - down.since)
        if answered >= Self.unownedSlotGrace { return "the cluster has answered \(reply) for \(answered)" }
        guard let since else { return nil }
        for (slot, first) in since.enumerated() {
            if let lost = Self.lostSlotDuration(since: first, mapTime: mapTime, now: now) {
                return "the cluster answered \(reply), and no primary has served the slot \(slot) for \(lost)"
            }
        }
        return nil
    }

    /// Updates `down` for a `CLUSTERDOWN` answer that came at `now` (milliseconds since `origin`):
    /// the first of a run keeps its time while the next ones come at most ``unownedSlotMapGap``
    /// apart; after a longer gap the time starts again, as for a slot without a primary.
    static func updateClusterDown(_ down: inout ClusterDown, now: UInt64) {
        let gap = UInt64(unownedSlotMapGap.components.seconds) * 1_000
        if down.since == 0 || now > down.last + gap { down.since = now + 1 }
        down.last = max(down.last, now)
    }

    /// The whole milliseconds from `origin` to now.
    private static func milliseconds(since origin: ContinuousClock.Instant) -> UInt64 {
        let elapsed = origin.duration(to: .now).components
        return UInt64(max(0, elapsed.seconds)) * 1_000 + UInt64(max(0, elapsed.attoseconds) / 1_000_000_000_000_000)
    }

    /// Updates `since`, when each slot was first left without a primary (see
    /// `State.unownedSince`), for a new map `topology` that came at `now`, the one before at
    /// `previousMap`: the slots it leaves so keep their time, or take `now`; the others have none,
    /// and so `since` is `nil` when every slot has a primary.
    ///
    /// After a gap of more than ``unownedSlotMapGap`` between the two maps, every slot takes `now`:
    /// nobody saw what happened in between (a failover may have ended and another begun).
    static func updateUnownedSince(
        _ since: inout [UInt64]?,
        for topology: ClusterTopology,
        now: UInt64,
        previousMap: UInt64
    ) {
        let owners = topology.owners
        let gap = UInt64(unownedSlotMapGap.components.seconds) * 1_000
        guard owners.contains(ClusterTopology.unowned) else {
            since = nil
            return
        }
        if since == nil || now > previousMap + gap { since = [UInt64](repeating: 0, count: ClusterSlot.count) }
        for slot in 0..<ClusterSlot.count {
            if owners[slot] != ClusterTopology.unowned {
                since![slot] = 0
            } else if since![slot] == 0 {
                since![slot] = now + 1
            }
        }
    }

    /// The map; when there is none yet, waits for a refresh that gives one, until `deadline`.
    private func currentTopology(
        key: String?,
        command: String,
        deadline: ContinuousClock.Instant
    ) async throws -> ClusterTopology {
        let (known, isOld) = state.withLock { state in
            (state.topology, state.lastRefresh.map { $0 + cluster.topologyRefreshInterval < .now } ?? false)
        }
        if let known {
            if isOld { requestRefresh() }
            return known
        }
        while state.withLock({ $0.topology }) == nil, ContinuousClock.now < deadline {
            try Task.checkCancellation()
            await nextRefresh(until: deadline)
        }
        try Task.checkCancellation()
        guard let topology = state.withLock({ $0.topology }) else {
            let reason = state.withLock { $0.lastFailure } ?? "no node answered in time"
            throw RedisFailure(.connect, "the cluster's slot map could not be had: \(reason)")
                .error(server: configuration.server, command: command, key: key)
        }
        return topology
    }

    /// Asks for the map and waits until a refresh ends (this one, or the one under way), the
    /// deadline passes or the task is cancelled, whichever comes first.
    ///
    /// With `joinsRunning`, a refresh under way is only waited for; without, it is followed by
    /// another, which starts after the call.
    private func nextRefresh(until deadline: ContinuousClock.Instant, joinsRunning: Bool = false) async {
        let id = state.withLock { state in
            defer { state.nextWaiter &+= 1 }
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let isRunning = state.withLock { state in
                    state.waiters[id] = continuation
                    return state.isRefreshing
                }
                if !(joinsRunning && isRunning) { requestRefresh() }
                let left = ContinuousClock.now.duration(to: deadline)
                let seconds = max(0, Double(left.components.seconds) + Double(left.components.attoseconds) * 1e-18)
                DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [weak self] in
                    self?.resumeWaiter(id)
                }
                if Task.isCancelled { resumeWaiter(id) }
            }
        } onCancel: {
            resumeWaiter(id)
        }
    }

    /// Resumes the waiter `id` if it still waits.
    private func resumeWaiter(_ id: UInt64) {
        state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
    }

    /// Points `redirection`'s slot at the node it names, until the next map says more.
    private func learn(_ redirection: ClusterRedirection) {
        state.withLock { state in
            state.topology?.assign(redirection.slot...redirection.slot, to: redirection.endpoint)
            // Served: a later map that leaves it without a primary starts its time anew.
            state.unownedSince?[redirection.slot] = 0
        }
        requestRefresh()
    }

    // MARK: - The map

    /// Calls `observer` with each new map (on the thread that learned it) until the returned
    /// cancellation is called; once at once with the current one, if any.
    func observeTopology(_ observer: @escaping @Sendable (ClusterTopology) -> Void) -> @Sendable () -> Void {
        let (id, current) = state.withLock { state in
            defer { state.nextObserver += 1 }
            state.observers[state.nextObserver] = observer
            return (state.nextObserver, state.topology)
        }
        if let current { observer(current) }
        return { [weak self] in self?.state.withLock { _ = $0.observers.removeValue(forKey: id) } }
    }

    /// Asks the cluster for its map, now or right after the refresh that runs.
    func requestRefresh() {
        let starts = state.withLock { state in
            if state.isRefreshing {
                state.refreshesAgain = true
                return false
            }
            state.isRefreshing = true
            return true
        }
        if starts { refresh() }
    }

    /// Asks the nodes for the map, one after another.
    ///
    /// The primaries it knows come first, then the seeds, then the replicas. The first map that covers every slot wins; when none does, the one that covers
    /// most.
    private func refresh() {
        var candidates: [Endpoint] = []
        let known = state.withLock { $0.topology }
        for endpoint in (known?.shards.map(\.primary) ?? []) + cluster.seeds
            + (known?.shards.flatMap(\.replicas) ?? []) where !candidates.contains(endpoint)
        {
            candidates.append(endpoint)
        }
        ask(candidates, from: 0, best: nil, failures: [])
    }

    private func ask(_ candidates: [Endpoint], from index: Int, best: ClusterTopology?, failures: [String]) {
        guard index < candidates.count else {
            finishRefresh(best, failure: failures.joined(separator: "; "))
            return
        }
        let endpoint = candidates[index]
        let next: @Sendable (ClusterTopology?, String?) -> Void = { [weak self] topology, failure in
            guard let self else { return }
            var best = best
            if let topology, topology.ownedSlots > (best?.ownedSlots ?? 0) { best = topology }
            if let best, best.ownedSlots == ClusterSlot.count {
                finishRefresh(best, failure: nil)
            } else {
                ask(candidates, from: index + 1, best: best, failures: failures + (failure.map { [$0] } ?? []))
            }
        }
        let pool: RedisPool
        do {
            pool = try self.pool(for: endpoint)
        } catch {
            next(nil, "\(endpoint): \(error)")
            return
        }
        let tls = configuration.tls != nil
        pool.send(RESPCommand("CLUSTER", ["SHARDS"], isIdempotent: true), key: nil) { result in
            switch result {
            case .success(let reply):
                let topology = ClusterTopology.fromShards(reply, askedNode: endpoint, tls: tls)
                next(topology, topology == nil ? "\(endpoint): an unexpected CLUSTER SHARDS reply \(reply)" : nil)
            case .failure(let error):
                let reply = ((error as? CacheError)?.underlyingError as? RedisFailure)?.reply ?? ""
                guard reply.lowercased().contains("unknown subcommand") else {
                    next(nil, "\(endpoint): \((error as? CacheError)?.message ?? "\(error)")")
                    return
                }
                // Before Redis 7.
                pool.send(RESPCommand("CLUSTER", ["SLOTS"], isIdempotent: true), key: nil) { result in
                    switch result {
                    case .success(let reply):
                        let topology = ClusterTopology.fromSlots(reply, askedNode: endpoint)
                        next(topology, topology == nil ? "\(endpoint): an unexpected CLUSTER SLOTS reply" : nil)
                    case .failure(let error):
                        next(nil, "\(endpoint): \((error as? CacheError)?.message ?? "\(error)")")
                    }
                }
            }
        }
    }

    private func finishRefresh(_ topology: ClusterTopology?, failure: String?) {
        let now = Self.milliseconds(since: origin)
        let (waiters, again, observers, watches) = state.withLock { state in
            if let topology {
                state.topology = topology
                Self.updateUnownedSince(&state.unownedSince, for: topology, now: now, previousMap: state.mapTime)
                state.mapTime = now
            }
            state.lastFailure = topology == nil ? failure : nil
            state.lastRefresh = .now
            state.isRefreshing = false
            // A failed refresh leaves the last map's slots as they were: watched on.
            let watches = state.unownedSince != nil && !state.isWatchingUnownedSlots
            if watches { state.isWatchingUnownedSlots = true }
            defer {
                state.waiters = [:]
                state.refreshesAgain = false
            }
            return (
                Array(state.waiters.values), state.refreshesAgain,
                topology == nil ? [] : Array(state.observers.values), watches
            )
        }
        if let topology { for observer in observers { observer(topology) } }
        for waiter in waiters { waiter.resume() }
        if again {
            // A pause, so that a burst of redirections makes a few refreshes, not one per command.
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { [weak self] in self?.requestRefresh() }
        }
        if watches { watchUnownedSlots() }
    }

    /// After `delay`, asks for the map if the last one is ``unownedSlotWatchInterval`` old and slots
    /// still lack a primary, or waits until it is (a tracked level asks every second); each
    /// refresh's end calls this again while they lack one.
    private func watchUnownedSlots(after delay: Duration = unownedSlotWatchInterval) {
        let seconds = Double(delay.components.seconds) + Double(delay.components.attoseconds) * 1e-18
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [weak self] in
            guard let self else { return }
            enum Next { case stop, wait(Duration), refresh }
            let now = Self.milliseconds(since: origin)
            let next = state.withLock { state -> Next in
                let age = Duration.milliseconds(now >= state.mapTime ? now - state.mapTime : 0)
                if state.unownedSince != nil && !state.isRefreshing && age < Self.unownedSlotWatchInterval {
                    return .wait(Self.unownedSlotWatchInterval - age)
                }
                // Done, or a refresh is under way or asked for now: its end watches on while slots
                // still lack a primary.
                state.isWatchingUnownedSlots = false
                return state.unownedSince == nil || state.isRefreshing ? .stop : .refresh
            }
            switch next {
            case .stop: break
            case .wait(let left): watchUnownedSlots(after: left)
            case .refresh: requestRefresh()
            }
        }
    }
}

extension ClusterRouter {
    /// Sends `command` to the node at `endpoint`, without following redirections (a `SCAN` of one
    /// primary's keys).
    ///
    /// - Throws: As ``send(_:key:slot:)``.
    func send(_ command: RESPCommand, key: String?, to endpoint: Endpoint) async throws -> RESPValue {
        let deadline = ContinuousClock.now + configuration.commandTimeout
        do {
            return try await pool(for: endpoint).send(command, key: key, deadline: deadline)
        } catch let error as CacheError {
            if let failure = error.underlyingError as? RedisFailure, failure.kind != .server, failure.kind != .cancelled
            {
                requestRefresh()
            }
            throw error
        }
    }
}
