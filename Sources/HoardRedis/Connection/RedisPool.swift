import Foundation
import Hoard

/// The level's connections, shared by every caller: each request goes to the next connection that
/// accepts it, where it is pipelined behind the requests already there.
final class RedisPool: Sendable {
    let configuration: RedisCacheLevel.Configuration
    private let connections: [RedisConnection]
    private let next = Locked(0)

    /// Opens `configuration.poolSize` connections (in the background).
    ///
    /// - Throws: `CacheError` with code `io`, the failed `pipe` call as its underlying error, when the
    ///   process has no file descriptor left for them.
    init(_ configuration: RedisCacheLevel.Configuration) throws {
        self.configuration = configuration
        var connections: [RedisConnection] = []
        for _ in 0..<configuration.poolSize {
            guard let connection = RedisConnection(configuration) else {
                // The connection's wake-up pipe failed; nothing ran since.
                let failure = POSIXFileError(operation: "pipe", path: "", errorNumber: errno)
                for opened in connections { opened.stop() }
                throw CacheError.io("Redis at \(configuration.server): cannot open a connection.", underlying: failure)
            }
            connections.append(connection)
        }
        self.connections = connections
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
        try Task.checkCancellation()
        let request = RedisRequest(command, key: key, deadline: .now + configuration.commandTimeout)
        let server = configuration.server
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                request.wait { result in
                    continuation.resume(
                        with: result.mapError { $0.error(server: server, command: command.name, key: key) }
                    )
                }
                dispatch(request)
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
    ///   - completion: Told once.
    func send(
        _ command: RESPCommand,
        key: String?,
        completion: @escaping @Sendable (Result<RESPValue, any Error>) -> Void
    ) {
        let request = RedisRequest(command, key: key, deadline: .now + configuration.commandTimeout)
        let server = configuration.server
        request.wait { result in
            completion(result.mapError { $0.error(server: server, command: command.name, key: key) })
        }
        dispatch(request)
    }

    /// Gives `request` to the next connection that accepts it; when every one refuses it, an
    /// idempotent request goes, as its one retry, to a connection that was found closed and waits to
    /// connect again.
    private func dispatch(_ request: RedisRequest) {
        let start = next.withLock { next in
            defer { next = next &+ 1 }
            return next
        }
        let count = connections.count
        var first: RedisFailure?
        for asRetry in request.isIdempotent ? [false, true] : [false] {
            for step in 0..<count {
                let index = Int((UInt(bitPattern: start) &+ UInt(step)) % UInt(count))
                guard let refusal = connections[index].submit(request, asRetry: asRetry) else { return }
                if first == nil { first = refusal }
            }
        }
        request.finish(.failure(first ?? RedisFailure(.closed, "no connection")))
    }
}
