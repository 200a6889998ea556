import Foundation
import Hoard

/// The level's connections, shared by every caller: each request goes to the next connection that
/// serves (while none does, to the next that accepts it, one still connecting), where it is
/// pipelined behind the requests already there.
final class RedisPool: Sendable {
    let configuration: RedisCacheLevel.Configuration
    private let connections: [RedisConnection]
    private let next = Locked(0)
    /// Skips the server while it does not answer.
    let breaker: CircuitBreaker
    /// With Sentinels: the level's share of the process's watch for a new primary.
    private let sentinelWatch: SentinelWatch.Share?

    /// Opens `configuration.poolSize` connections (in the background).
    ///
    /// - Throws: `CacheError` with code `io`, the failed `pipe` call as its underlying error, when the
    ///   process has no file descriptor left for them.
    init(_ configuration: RedisCacheLevel.Configuration) throws {
        self.configuration = configuration
        breaker = CircuitBreaker(threshold: configuration.timeoutsBeforeSkipping)
        var connections: [RedisConnection] = []
        for _ in 0..<configuration.poolSize {
            guard let connection = RedisConnection(configuration) else {
                // The connection's wake-up pipe failed; nothing ran since.
                let failure = CacheError.FileError(operation: "pipe", path: "", errorNumber: errno)
                for opened in connections { opened.stop() }
                throw CacheError.io("Redis at \(configuration.server): cannot open a connection.", underlying: failure)
            }
            connections.append(connection)
        }
        self.connections = connections
        sentinelWatch = SentinelWatch.share(configuration)
    }

    deinit {
        for connection in connections { connection.stop() }
    }

    /// Sends `command` and returns its reply (an error reply throws).
    ///
    /// - Parameters:
    ///   - command: The command.
    ///   - key: The caller's key, for the error message.
    /// - Returns: The reply.
    /// - Throws: `CacheError` with code `network` naming the server and the cause, within the
    ///   command timeout; `CancellationError` when the task is cancelled.
    func send(_ command: RESPCommand, key: String?) async throws -> RESPValue {
        try await send(command, key: key, deadline: .now + configuration.commandTimeout)
    }

    /// Sends `command` and returns its reply (an error reply throws), waiting until `deadline` at
    /// most.
    ///
    /// - Parameters:
    ///   - command: The command.
    ///   - key: The caller's key, for the error message.
    ///   - deadline: When the caller stops waiting.
    ///   - asking: Whether `ASKING` goes just before the command, on the same connection (a cluster
    ///     node's `ASK` redirection).
    /// - Returns: The reply.
    /// - Throws: `CacheError` with code `network` naming the server and the cause; `serverRefused`
    ///   for an error reply; `CancellationError` when the task is cancelled.
    func send(
        _ command: RESPCommand,
        key: String?,
        deadline: ContinuousClock.Instant,
        asking: Bool = false
    ) async throws -> RESPValue {
        try Task.checkCancellation()
        let request = RedisRequest(command, key: key, deadline: deadline)
        let leading = asking ? RedisRequest(RESPCommand("ASKING", []), key: nil, deadline: deadline) : nil
        let server = configuration.server
        let hadTime = hasTimeToCount(until: deadline)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                request.wait { [self] result in
                    record(result, hadTime: hadTime)
                    continuation.resume(
                        with: result.mapError { $0.error(server: server, command: command.name, key: key) }
                    )
                }
                dispatch(request, after: leading)
            }
        } onCancel: {
            request.finish(.failure(RedisFailure(.cancelled, "cancelled")))
        }
    }

    /// Sends `command` and tells `completion` the reply or the error, on the connection's I/O
    /// thread (or the caller's, when it fails at once).
    ///
    /// - Parameters:
    ///   - command: The command.
    ///   - key: The caller's key, for the error message.
    ///   - deadline: When to stop waiting; `nil` for the command timeout from now.
    ///   - completion: Told once.
    func send(
        _ command: RESPCommand,
        key: String?,
        deadline: ContinuousClock.Instant? = nil,
        completion: @escaping @Sendable (Result<RESPValue, any Error>) -> Void
    ) {
        let request = RedisRequest(command, key: key, deadline: deadline ?? .now + configuration.commandTimeout)
        let server = configuration.server
        let hadTime = hasTimeToCount(until: request.deadline)
        request.wait { [self] result in
            record(result, hadTime: hadTime)
            completion(result.mapError { $0.error(server: server, command: command.name, key: key) })
        }
        dispatch(request)
    }

    // MARK: - The circuit

    /// Whether a request sent now with `deadline` has time enough for its timeout to count in the
    /// breaker: half the command timeout at least.
    ///
    /// A request of a Redis Cluster level may leave after its caller waited for a map through an
    /// election, or paused on `CLUSTERDOWN`, with a few milliseconds left; timing out then on the
    /// node just elected says nothing of that node, and a burst of such requests would open its
    /// circuit.
    private func hasTimeToCount(until deadline: ContinuousClock.Instant) -> Bool {
        deadline - .now >= configuration.commandTimeout / 2
    }

    /// Counts a request's outcome in the breaker, and starts probing when it opened the circuit.
    private func record(_ result: Result<RESPValue, RedisFailure>, hadTime: Bool) {
        let wasOpen = breaker.isOpen
        guard let (opening, pause) = breaker.record(result, hadTime: hadTime) else {
            if wasOpen, !breaker.isOpen { logAnswersAgain() }
            return
        }
        HoardLogger.log(
            .warning,
            "Redis at \(configuration.server): \(breaker.threshold) commands in a row had no reply within "
                + "\(configuration.commandTimeout); commands fail at once until the server answers a probe."
        )
        probe(opening, after: pause)
    }

    private func logAnswersAgain() {
        HoardLogger.log(.warning, "Redis at \(configuration.server) answers again; commands go to it again.")
    }

    /// Sends a `PING` past the open circuit after `pause`; again after a longer pause until the
    /// circuit closes (this probe or any reply answered).
    private func probe(_ opening: Int, after pause: Duration) {
        let seconds = Double(pause.components.seconds) + Double(pause.components.attoseconds) * 1e-18
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [weak self] in
            guard let self, breaker.isOpen else { return }
            let request = RedisRequest(
                RESPCommand("PING", [], isIdempotent: true),
                key: nil,
                deadline: .now + configuration.commandTimeout
            )
            request.wait { [weak self] result in
                guard let self else { return }
                let wasOpen = breaker.isOpen
                if let next = breaker.probed(result, opening: opening) {
                    probe(opening, after: next)
                } else if wasOpen, !breaker.isOpen {
                    logAnswersAgain()
                }
            }
            dispatch(request, pastTheBreaker: true)
        }
    }

    /// Gives `request` to the next connection that serves, else to the next that accepts it (one
    /// still connecting); when every one refuses it, an idempotent request goes, as its one retry, to
    /// a connection that was found closed and waits to connect again.
    ///
    /// A connection whose handshake hangs would hold a request until its deadline while another
    /// could answer it now: it gets requests only while none serves.
    ///
    /// A `leading` request (`ASKING`) goes just before `request` on the same connection, and is
    /// never retried.
    private func dispatch(_ request: RedisRequest, after leading: RedisRequest? = nil, pastTheBreaker: Bool = false) {
        if !pastTheBreaker, let refusal = breaker.refusal() {
            request.finish(.failure(refusal))
            return
        }
        let start = next.withLock { next in
            defer { next = next &+ 1 }
            return next
        }
        let count = connections.count
        var first: RedisFailure?
        for asRetry in request.isIdempotent && leading == nil ? [false, true] : [false] {
            for onlyServing in asRetry ? [false] : [true, false] {
                for step in 0..<count {
                    let connection = connections[Int((UInt(bitPattern: start) &+ UInt(step)) % UInt(count))]
                    if onlyServing, !connection.isReady { continue }
                    guard let refusal = connection.submit(request, asRetry: asRetry, after: leading) else { return }
                    if first == nil { first = refusal }
                }
            }
        }
        request.finish(.failure(first ?? RedisFailure(.closed, "no connection")))
    }
}
