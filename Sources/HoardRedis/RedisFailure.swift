import Foundation
import Hoard

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Why a request to the server failed, before it becomes a `CacheError` for the caller.
///
/// The underlying error of the `CacheError` a ``RedisCacheLevel`` throws (code `network`, or
/// `serverRefused` for an error reply): its
/// description says what failed, in one sentence, without the server's address, which the
/// `CacheError` message adds.
struct RedisFailure: Error, Sendable, CustomStringConvertible {
    /// The kinds of failure, for tests and for the decisions the client makes.
    enum Kind: Sendable, Equatable {
        /// The server could not be reached: refused, unreachable, a name that does not resolve.
        case connect
        /// The handshake failed: a wrong password, an unknown user, a database that does not exist.
        case handshake
        /// No reply came within the command timeout.
        case timeout
        /// The connection broke with the request on it: the command may or may not have run.
        case connectionLost
        /// The server sent bytes that are not RESP, or a reply over the limits.
        case protocolViolation
        /// The server answered with an error reply (`-ERR …`).
        case server
        /// The request was not sent: the server stopped answering, and is left alone until it
        /// answers a probe again (see `CircuitBreaker`).
        case skipped
        /// The level was released while the request waited.
        case closed
        /// The calling task was cancelled.
        case cancelled
    }

    let kind: Kind
    let description: String
    /// The server's error reply, as it came, for a failure of kind ``Kind/server``.
    let reply: String?

    init(_ kind: Kind, _ description: String, reply: String? = nil) {
        self.kind = kind
        self.description = description
        self.reply = reply
    }

    /// A failed system call: its name and the system's reason.
    static func system(_ kind: Kind, _ call: String, errno number: Int32) -> RedisFailure {
        RedisFailure(kind, "\(call) failed: \(String(cString: strerror(number))) (errno \(number))")
    }

    /// An error reply to a command, as a failure; a cluster node's redirection says what it means
    /// to a level made for one server (a cluster level follows it before any caller sees it).
    static func answered(_ message: String) -> RedisFailure {
        let isRedirection = message.hasPrefix("MOVED ") || message.hasPrefix("ASK ") || message.hasPrefix("CLUSTERDOWN")
        guard isRedirection else { return RedisFailure(.server, "the server answered \(message)", reply: message) }
        return RedisFailure(
            .server,
            "the server answered \(message): it is a node of a Redis Cluster; make the level with "
                + "RedisCacheLevel(cluster:namespace:) to use the cluster",
            reply: message
        )
    }

    /// Whether this is a login or database refusal that cannot pass by itself.
    ///
    /// A wrong password or user, a missing password, a permission the user lacks, a database the
    /// server does not have, an unknown command are; too many clients, a server still loading and
    /// the like may pass, and are not.
    var isPermanentMisconfiguration: Bool {
        guard kind == .handshake else { return false }
        let permanent = [
            "WRONGPASS", "NOAUTH", "NOPERM", "DB index is out of range", "invalid DB index",
            "unknown command", "without any password configured", "SELECT is not allowed",
            // Redis 5 and older, and protected mode.
            "invalid password", "no password is set", "wrong number of arguments for 'auth'", "DENIED",
            // TLS: a certificate refused either way, a server that does not speak TLS, a client
            // certificate that cannot be read.
            "TLS certificate was not accepted", "TLS handshake failed", "TLS session failed", "TLS set-up failed",
        ]
        let lowered = description.lowercased()
        return permanent.contains { lowered.contains($0.lowercased()) }
    }

    /// The error the caller gets: `CancellationError` for a cancelled task, a `CacheError` with code
    /// `serverRefused` when the server answered the command with an error, otherwise one with code
    /// `network`; the message names the server and the command.
    func error(server: String, command: String, key: String?) -> any Error {
        if kind == .cancelled { return CancellationError() }
        let what = key.map { "\(command) \"\($0)\"" } ?? command
        return CacheError(
            code: kind == .server ? .serverRefused : .network,
            message: "Redis at \(server): \(what) failed: \(description)",
            key: key,
            underlyingError: self
        )
    }
}
