import Foundation
import Hoard

/// One connection to the server, with its own I/O thread: the requests given to it are written in
/// order, pipelined, and each reply finishes the oldest request still waiting for one.
///
/// The thread connects, runs the handshake, then serves; when the connection breaks it fails the
/// requests that were on it (and only those), waits a capped, jittered, exponentially growing delay,
/// and connects again. While it waits, ``submit(_:asRetry:)`` refuses requests at once with the last
/// failure, so a caller never waits on a server that is known to be down. Callers are resumed from
/// the I/O thread; nothing here blocks a cooperative thread.
///
/// A connection found closed (the server, a proxy or a failover closed it: an end of stream, a reset
/// or a refused send) is not a server known to be down, and an idempotent request gets one more
/// chance on the fresh connection that follows: the requests on it that had no byte of their reply
/// yet stay queued for it (``failAll(_:replyStarted:)``), and while it waits to reconnect it takes
/// an idempotent request the pool found no other connection for. A timeout is never retried (the
/// server may be stalled), nor a request that is not idempotent.
final class RedisConnection: Sendable {
    enum Status: Sendable {
        /// Connecting or running the handshake: requests queue and are written once it is done.
        case connecting
        case ready
        /// Waiting before the next attempt: requests are refused with this failure.
        case down(RedisFailure)
        case stopped
    }

    struct Shared: Sendable {
        var status = Status.connecting
        /// Every request accepted and not yet answered, oldest first, from `head` on.
        var queue: [RedisRequest] = []
        var head = 0
        /// The encoded requests the thread has not taken yet.
        var outgoing: [UInt8] = []
        /// Whether a wake-up is on its way to the thread.
        var isWakePending = false
        /// Why the thread should drop its connection and connect again, when someone asked.
        var reconnectRequest: RedisFailure?
    }

    let configuration: RedisCacheLevel.Configuration
    let shared = Locked(Shared())
    let wake: WakePipe
    /// For the connection that tracks keys for client-side caching: what it tells, and how it pings.
    ///
    /// `nil` for a data connection.
    let tracking: (any TrackingObserver)?

    /// Creates the connection and starts its thread, which connects at once.
    ///
    /// - Parameters:
    ///   - configuration: The server and the timeouts.
    ///   - tracking: Makes it a tracking connection (see ``TrackingObserver``).
    ///
    /// Fails (`nil`) when the process is out of file descriptors or threads.
    init?(_ configuration: RedisCacheLevel.Configuration, tracking: (any TrackingObserver)? = nil) {
        guard let wake = WakePipe() else { return nil }
        self.configuration = configuration
        self.wake = wake
        self.tracking = tracking
        if let sentinel = configuration.sentinel { SentinelSwitches.register(self, for: sentinel) }
        let thread = Thread { [self] in ConnectionLoop(self).run() }
        thread.name = "Hoard Redis \(configuration.server)"
        thread.start()
    }

    /// Queues `request` to be written.
    ///
    /// - Parameters:
    ///   - request: The request.
    ///   - asRetry: Whether a connection that waits to reconnect after it was found closed takes the
    ///     request as its one retry (``RedisRequest/takeRetry()``), to write once it is connected
    ///     again, instead of refusing it.
    ///   - leading: A request written just before `request`, with nothing between them (`ASKING`
    ///     before a command a cluster node redirected); never taken as a retry.
    /// - Returns: `nil` when the request was accepted, else why it was refused.
    func submit(_ request: RedisRequest, asRetry: Bool = false, after leading: RedisRequest? = nil) -> RedisFailure? {
        let (refusal, wakes) = shared.withLock { shared -> (RedisFailure?, Bool) in
            switch shared.status {
            case .down(let failure):
                guard asRetry, leading == nil, failure.kind == .connectionLost, request.takeRetry() else {
                    return (failure, false)
                }
                shared.queue.append(request)
                shared.outgoing.append(contentsOf: request.bytes)
            case .stopped: return (RedisFailure(.closed, "the level was released"), false)
            case .connecting, .ready:
                if let leading {
                    shared.queue.append(leading)
                    shared.outgoing.append(contentsOf: leading.bytes)
                }
                shared.queue.append(request)
                shared.outgoing.append(contentsOf: request.bytes)
            }
            // Ready, the thread writes the request; not yet, it times the request out at its
            // deadline, which may come before the end of the wait it is in (a handshake's, a
            // backoff's).
            guard !shared.isWakePending else { return (nil, false) }
            shared.isWakePending = true
            return (nil, true)
        }
        if wakes { wake.wake() }
        return refusal
    }

    /// Makes the thread drop its connection, with `reason` for the requests on it, and connect
    /// again (a Sentinel announced a new primary).
    func reconnect(_ reason: RedisFailure) {
        shared.withLock { $0.reconnectRequest = reason }
        wake.wake()
    }

    /// Whether ``reconnect(_:)`` was called since the last ``takeReconnectRequest()``.
    var hasReconnectRequest: Bool { shared.withLock { $0.reconnectRequest != nil } }

    /// The reason given to ``reconnect(_:)`` since the last call, if any.
    func takeReconnectRequest() -> RedisFailure? {
        shared.withLock { shared in
            defer { shared.reconnectRequest = nil }
            return shared.reconnectRequest
        }
    }

    /// Whether the connection is serving (for choosing one in the pool).
    var isReady: Bool {
        shared.withLock { if case .ready = $0.status { true } else { false } }
    }

    /// Stops the thread; the requests still waiting fail with `closed`.
    func stop() {
        shared.withLock { $0.status = .stopped }
        wake.wake()
    }

    /// Sets the status, unless the connection was stopped; returns whether it was.
    func setStatus(_ status: Status) -> Bool {
        shared.withLock { shared in
            if case .stopped = shared.status { return true }
            shared.status = status
            return false
        }
    }

    var isStopped: Bool {
        shared.withLock { if case .stopped = $0.status { true } else { false } }
    }

    /// Fails every request accepted so far, written or not; when the connection was found closed,
    /// keeps the idempotent ones that had no byte of their reply and were not retried before, to
    /// write on the next connection (their one retry).
    ///
    /// - Parameters:
    ///   - failure: Why the connection ended.
    ///   - replyStarted: Whether part of the oldest request's reply had arrived.
    func failAll(_ failure: RedisFailure, replyStarted: Bool = false) {
        let failed = shared.withLock { shared -> [RedisRequest] in
            var failed: [RedisRequest] = []
            var kept: [RedisRequest] = []
            for (index, request) in shared.queue[shared.head...].enumerated() {
                let hasReplyBytes = index == 0 && replyStarted
                if failure.kind == .connectionLost, !hasReplyBytes, request.takeRetry() {
                    kept.append(request)
                } else if !request.isFinished {
                    failed.append(request)
                }
            }
            shared.queue = kept
            shared.head = 0
            shared.outgoing = kept.flatMap(\.bytes)
            return failed
        }
        for request in failed { request.finish(.failure(failure)) }
    }

    /// Finishes the requests whose deadline passed with a timeout; while a connection serves them,
    /// they stay queued for their replies.
    ///
    /// - Parameters:
    ///   - now: The time the deadlines are judged at.
    ///   - isConnecting: Whether no connection serves the requests yet (the thread connects, or
    ///     waits to). Then none of them was written: those whose deadline passed leave the queue,
    ///     since a command its caller was told timed out must not run later, after newer ones. And
    ///     the next request accepted wakes the thread, whose wait would otherwise end only at the
    ///     connect timeout or the backoff's end.
    /// - Returns: The earliest deadline of a request still waiting, and the oldest request's deadline.
    func expireRequests(
        now: ContinuousClock.Instant,
        isConnecting: Bool = false
    ) -> (next: ContinuousClock.Instant?, oldest: ContinuousClock.Instant?) {
        let (expired, next, oldest) = shared.withLock {
            shared -> ([RedisRequest], ContinuousClock.Instant?, ContinuousClock.Instant?) in
            // Under the lock that finds `next`: a request accepted from now on is either counted in
            // it or wakes the thread.
            if isConnecting { shared.isWakePending = false }
            var expired: [RedisRequest] = []
            var next: ContinuousClock.Instant?
            for request in shared.queue[shared.head...] where !request.isFinished {
                if request.deadline <= now {
                    expired.append(request)
                } else if next.map({ request.deadline < $0 }) ?? true {
                    next = request.deadline
                }
            }
            // An `ASKING` has its command's deadline: they leave together, or neither does.
            if isConnecting, shared.queue[shared.head...].contains(where: { $0.deadline <= now }) {
                shared.queue = shared.queue[shared.head...].filter { $0.deadline > now }
                shared.head = 0
                shared.outgoing = shared.queue.flatMap(\.bytes)
            }
            return (
                expired, next, shared.queue.indices.contains(shared.head) ? shared.queue[shared.head].deadline : nil
            )
        }
        let timeout = configuration.commandTimeout
        for request in expired {
            request.finish(.failure(RedisFailure(.timeout, "no reply within \(timeout) (timeout)")))
        }
        return (next, oldest)
    }

    /// Finishes the oldest waiting requests with `replies`, in order.
    ///
    /// - Returns: `false` when a reply came with no request to match: the stream is out of step.
    func deliver(_ replies: [RESPValue]) -> Bool {
        let (requests, inStep) = shared.withLock { shared -> ([RedisRequest], Bool) in
            let available = shared.queue.count - shared.head
            let count = min(available, replies.count)
            let requests = Array(shared.queue[shared.head..<(shared.head + count)])
            shared.head += count
            if shared.head == shared.queue.count {
                shared.queue.removeAll(keepingCapacity: true)
                shared.head = 0
            } else if shared.head > 1024 && shared.head * 2 > shared.queue.count {
                shared.queue.removeFirst(shared.head)
                shared.head = 0
            }
            return (requests, count == replies.count)
        }
        for (request, reply) in zip(requests, replies) {
            if case .error(let message) = reply {
                request.finish(.failure(RedisFailure.answered(message)))
            } else {
                request.finish(.success(reply))
            }
        }
        return inStep
    }

    /// The bytes of the requests accepted since the last call, once the connection is ready.
    func takeOutgoing() -> [UInt8] {
        shared.withLock { shared in
            shared.isWakePending = false
            defer { shared.outgoing = [] }
            return shared.outgoing
        }
    }
}

/// The capped, jittered exponential delay between two connection attempts.
enum ReconnectBackoff {
    static let initial = Duration.milliseconds(20)
    static let maximum = Duration.seconds(1)

    /// The wait before attempt number `attempt` (1 for the first retry): between half and all of
    /// `initial × 2^(attempt − 1)`, never more than ``maximum``.
    static func delay(beforeAttempt attempt: Int) -> Duration {
        let exponent = min(max(attempt - 1, 0), 16)
        let full = min(initial * (1 << exponent), maximum)
        return full * Double.random(in: 0.5...1)
    }
}
