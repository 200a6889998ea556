import Foundation
import Hoard

/// The one tracking connection of a process for a server, database, user, client name and namespace,
/// and the caches subscribed to it.
///
/// It sends `CLIENT TRACKING ON BCAST PREFIX <namespace>:` at each handshake, so the server announces
/// every change of the namespace's keys, whoever makes it (this process's own writes included: the
/// data connections are not tracked, so `NOLOOP` could not tell them apart). Every event reaches the
/// subscribers from the connection's I/O thread, one at a time, in order, and to each subscriber in
/// the order they subscribed (a later one hears of a change once the earlier ones have applied it); a
/// subscriber that comes
/// while tracking is confirmed is told `CacheInvalidation.tracking` from that thread too, so that it
/// can never hear it after a later loss.
final class TrackingHub: TrackingObserver, @unchecked Sendable {
    // Safe because the mutable state is in `state` and `connection` (each a `Locked`); the rest is
    // set in `init`, before the hub is shared.

    /// Where tracking stands.
    enum Status: Sendable {
        case connecting
        case confirmed
        case down
        case refused(String)
    }

    /// A subscriber: its handler, and the semaphore its subscribe call waits on for the first answer.
    struct Subscriber: Sendable {
        let handler: @Sendable (CacheInvalidation) -> Void
        let answered: DispatchSemaphoreBox
        var isConfirmed = false
        /// Whether its subscribe call waits for the first answer still: only then is a refusal
        /// final for it (the call throws it).
        var isWaiting = true
        /// The refusal its subscribe call throws.
        var refusal: String?
    }

    struct State: Sendable {
        var status = Status.connecting
        var subscribers: [UInt64: Subscriber] = [:]
        var nextID: UInt64 = 0

        /// The subscribers in the order they subscribed, the order each event reaches them in.
        var inOrder: [Subscriber] { subscribers.sorted { $0.key < $1.key }.map(\.value) }
    }

    /// The hubs of this process, by ``key``.
    static let hubs = Locked<[String: TrackingHub]>([:])

    let key: String
    let configuration: RedisCacheLevel.Configuration
    let trackingCommand: RESPCommand
    let prefix: [UInt8]
    let state = Locked(State())
    /// The tracking connection, until the last subscriber leaves: the connection holds the hub (its
    /// observer), so the hub lets it go then, and both are freed once its thread ends.
    private let connection = Locked<RedisConnection?>(nil)

    var pingInterval: Duration { configuration.trackingPingInterval }
    var pingTimeout: Duration { configuration.trackingPingTimeout }

    /// Makes the hub with its first subscriber in place before its connection starts, so that the
    /// connection's first answer, however soon it comes, is that subscriber's.
    private init?(
        key: String,
        configuration: RedisCacheLevel.Configuration,
        namespace: String,
        first subscriber: Subscriber
    ) {
        self.key = key
        var tracking = configuration
        tracking.clientName = (configuration.clientName ?? "hoard") + "-tracking"
        self.configuration = tracking
        prefix = RedisCacheLevel.prefix(namespace)
        var command = RESPCommand("CLIENT", arguments: 5)
        command.append("TRACKING")
        command.append("ON")
        command.append("BCAST")
        command.append("PREFIX")
        command.append(prefix)
        trackingCommand = command
        state.withLock { state in
            state.nextID = Self.firstID
            state.subscribers[Self.firstID] = subscriber
        }
        guard let connection = RedisConnection(tracking, tracking: self) else { return nil }
        self.connection.withLock { $0 = connection }
    }

    /// The key of a hub: what makes two levels' announcements the same (and the client name, so that
    /// levels that name their connections differently, as two instances in one test would, each
    /// have their own).
    static func key(_ configuration: RedisCacheLevel.Configuration, namespace: String) -> String {
        [
            configuration.server, String(configuration.database), configuration.username ?? "",
            configuration.clientName ?? "", configuration.credentials?.name ?? "", namespace.canonicalKey,
        ].joined(separator: "\u{0}")
    }

    /// Subscribes `handler` to the invalidations of `namespace` on the server, opening the process's
    /// tracking connection for it if there is none, and waits (at most the connect and command
    /// timeouts) for the server's first answer.
    ///
    /// - Throws: `CacheError` with code `invalidConfiguration` when the server cannot track; `io` when
    ///   no connection can be opened (no file descriptor left).
    static func subscribe(
        _ configuration: RedisCacheLevel.Configuration,
        namespace: String,
        handler: @escaping @Sendable (CacheInvalidation) -> Void
    ) throws -> any InvalidationSubscription {
        let key = key(configuration, namespace: namespace)
        let answered = DispatchSemaphoreBox()
        var failure: Int32 = 0
        let subscriber = Subscriber(handler: handler, answered: answered)
        let found = hubs.withLock { hubs -> (TrackingHub, UInt64)? in
            if let existing = hubs[key] { return (existing, existing.add(subscriber)) }
            let made = TrackingHub(key: key, configuration: configuration, namespace: namespace, first: subscriber)
            guard let made else {
                // The connection's wake-up pipe failed; nothing ran since.
                failure = errno
                return nil
            }
            hubs[key] = made
            return (made, firstID)
        }
        guard let (hub, id) = found else {
            throw CacheError.io(
                "Redis at \(configuration.server): cannot open the tracking connection.",
                underlying: CacheError.FileError(operation: "pipe", path: "", errorNumber: failure)
            )
        }
        let subscription = Subscription(hub: hub, id: id)
        // The first answer comes within one handshake; a server that cannot be reached yet is not
        // an error: the subscriber hears `.tracking` once it can.
        _ = answered.semaphore.wait(
            timeout: .now() + seconds(configuration.connectTimeout + configuration.commandTimeout)
        )
        let refusal = hub.state.withLock { state -> String? in
            state.subscribers[id]?.isWaiting = false
            if case .refused(let reason) = state.status { return reason }
            return state.subscribers[id]?.refusal
        }
        if let reason = refusal {
            subscription.cancel()
            throw CacheError.invalidConfiguration("Redis: \(reason)")
        }
        return subscription
    }

    private static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) * 1e-18
    }

    /// The number of the subscriber a hub is made with.
    private static let firstID: UInt64 = 1

    /// Adds a subscriber; wakes the I/O thread to confirm it when tracking is confirmed already.
    private func add(_ subscriber: Subscriber) -> UInt64 {
        let (id, status) = state.withLock { state -> (UInt64, Status) in
            state.nextID += 1
            state.subscribers[state.nextID] = subscriber
            return (state.nextID, state.status)
        }
        switch status {
        case .confirmed: connection.withLock { $0 }?.wake.wake()
        case .refused: subscriber.answered.semaphore.signal()
        case .connecting, .down: break
        }
        return id
    }

    /// Removes a subscriber; the last one closes the connection.
    fileprivate func remove(_ id: UInt64) {
        let isLast = Self.hubs.withLock { hubs -> Bool in
            let isLast = state.withLock { state -> Bool in
                state.subscribers[id] = nil
                return state.subscribers.isEmpty
            }
            if isLast, hubs[key] === self { hubs[key] = nil }
            return isLast
        }
        guard isLast else { return }
        let closing = connection.withLock { connection in
            defer { connection = nil }
            return connection
        }
        closing?.stop()
    }

    // MARK: - TrackingObserver

    func trackingDidConfirm() {
        let told = state.withLock { state -> [Subscriber] in
            state.status = .confirmed
            for id in state.subscribers.keys {
                state.subscribers[id]?.isConfirmed = true
                state.subscribers[id]?.isWaiting = false
            }
            return state.inOrder
        }
        for subscriber in told {
            subscriber.handler(.tracking)
            subscriber.answered.semaphore.signal()
        }
    }

    func trackingDidWake() {
        let newcomers = state.withLock { state -> [Subscriber] in
            guard case .confirmed = state.status else { return [] }
            var newcomers: [Subscriber] = []
            for (id, subscriber) in state.subscribers.sorted(by: { $0.key < $1.key }) where !subscriber.isConfirmed {
                state.subscribers[id]?.isConfirmed = true
                state.subscribers[id]?.isWaiting = false
                newcomers.append(subscriber)
            }
            return newcomers
        }
        for subscriber in newcomers {
            subscriber.handler(.tracking)
            subscriber.answered.semaphore.signal()
        }
    }

    func trackingDidFail(_ failure: RedisFailure) {
        let told = state.withLock { state -> [Subscriber] in
            switch state.status {
            case .refused: return []
            case .connecting, .down:
                state.status = .down
                // The first answer: a subscribe call waits no longer (its gate stays closed).
                for (id, subscriber) in state.subscribers {
                    state.subscribers[id]?.isWaiting = false
                    subscriber.answered.semaphore.signal()
                }
                return []
            case .confirmed:
                state.status = .down
                defer { for id in state.subscribers.keys { state.subscribers[id]?.isConfirmed = false } }
                return state.inOrder.filter(\.isConfirmed)
            }
        }
        let reason = "the tracking connection to \(configuration.server) was lost: \(failure.description)"
        for subscriber in told { subscriber.handler(.all(reason: reason)) }
    }

    func trackingWasRefused(_ reason: String) -> Bool {
        // Final only for the subscribe calls that wait for their first answer: they throw it. For a
        // subscriber whose call returned already (its first answer was a passing failure, or came
        // after the wait), it is retried, as after the server tracked once: an ACL may be fixed, a
        // node may finish starting. With only waiting subscribers, the connection stops now (as
        // their calls, throwing, would stop it anyway).
        let (waiting, isFinal) = Self.hubs.withLock { hubs -> ([Subscriber], Bool) in
            state.withLock { state in
                let waiting = state.subscribers.filter(\.value.isWaiting)
                for id in waiting.keys {
                    state.subscribers[id]?.refusal = reason
                    state.subscribers[id]?.isWaiting = false
                }
                guard !waiting.isEmpty, waiting.count == state.subscribers.count else {
                    return (Array(waiting.values), false)
                }
                if hubs[key] === self { hubs[key] = nil }
                state.status = .refused(reason)
                return (Array(waiting.values), true)
            }
        }
        for subscriber in waiting { subscriber.answered.semaphore.signal() }
        return isFinal
    }

    func trackingDidReceive(_ push: [RESPValue]) {
        guard push.count == 2, push[0].bytes == Data("invalidate".utf8) else { return }
        let event: CacheInvalidation
        switch push[1] {
        case .null:
            event = .all(reason: "the server at \(configuration.server) was flushed (FLUSHALL or FLUSHDB)")
        case .array(let names):
            var keys: [String] = []
            keys.reserveCapacity(names.count)
            // Each name is the canonical form of a key (see `RedisCacheLevel.storedKey(_:)`): the
            // caches match it with `==`, which finds every spelling of it.
            // A lease (see `RedisCacheLevel.leaseKey(_:)`) is no value: its changes are not announced.
            var leases = 0
            for name in names {
                guard let bytes = name.bytes, bytes.starts(with: prefix) else { continue }
                let key = bytes.dropFirst(prefix.count)
                if key.first == RedisCacheLevel.leaseMark {
                    leases += 1
                    continue
                }
                keys.append(String(decoding: key, as: UTF8.self))
            }
            if keys.isEmpty && leases > 0 { return }
            event = .keys(keys)
        default:
            return
        }
        let told = state.withLock { $0.inOrder.filter(\.isConfirmed) }
        for subscriber in told {
            subscriber.handler(event)
            // A flush leaves the connection tracking: every later change is still announced.
            if case .all = event { subscriber.handler(.tracking) }
        }
    }
}

/// A `DispatchSemaphore` in a `Sendable` box (it is thread-safe: that is what it is for).
struct DispatchSemaphoreBox: @unchecked Sendable {
    // Safe because a semaphore is made to be signalled and waited on from any thread.
    let semaphore = DispatchSemaphore(value: 0)
}

extension TrackingHub {
    /// One subscriber's hold on a hub.
    final class Subscription: InvalidationSubscription {
        private let hub: TrackingHub
        private let id: UInt64
        private let isCancelled = Locked(false)

        fileprivate init(hub: TrackingHub, id: UInt64) {
            self.hub = hub
            self.id = id
        }

        func cancel() {
            let wasCancelled = isCancelled.withLock { isCancelled in
                defer { isCancelled = true }
                return isCancelled
            }
            if !wasCancelled { hub.remove(id) }
        }
    }
}
