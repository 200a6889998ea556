// A `ConnectionLoop` making the calls of a connection attempt that may block for long: the host
// name lookup and the user's credentials provider, each on a thread of its own (`BlockingCall`).

import Foundation
import Hoard

extension ConnectionLoop {
    /// Host names whose lookup a test replaces (a resolver that is slow, or never answers), with what
    /// replaces it; empty outside the tests, which give each name a test of its own.
    static let replacedLookups = Locked<[String: @Sendable (String, Int) -> Result<[SocketAddress], RedisFailure>]>(
        [:]
    )

    /// The socket's address, or the host's addresses; a name is looked up on a thread of its own, so
    /// that neither the connect timeout nor the requests' deadlines wait for the lookup.
    ///
    /// While a lookup of `server` that an earlier attempt gave up on is still under way, this attempt
    /// waits for it instead of beginning another.
    func resolve(
        _ server: RedisCacheLevel.Configuration.Endpoint,
        until deadline: ContinuousClock.Instant
    ) -> Result<[SocketAddress], RedisFailure> {
        if let socketPath = configuration.socketPath { return SocketAddress.unix(path: socketPath).map { [$0] } }
        let host = server.host
        let port = server.port
        if SocketAddress.isNumeric(host) { return SocketAddress.resolve(host: host, port: port) }
        let isEarlier = lookups[server] != nil
        let call =
            lookups[server]
            ?? BlockingCall(waking: connection.wake) {
                let lookUp = Self.replacedLookups.withLock { $0[host] } ?? SocketAddress.resolve(host:port:)
                return lookUp(host, port)
            }
        lookups[server] = call
        let outcome = wait(for: call, until: deadline)
        if call.outcome != nil { lookups[server] = nil }
        return outcome
            ?? .failure(
                RedisFailure(
                    .connect,
                    "looking up \(host) took longer than \(configuration.connectTimeout)\(Self.underWay(isEarlier))"
                )
            )
    }

    /// What `provider` gives, asked on a thread of its own, so that neither the connect timeout nor
    /// the requests' deadlines wait for it.
    ///
    /// While a call that an earlier attempt gave up on is still under way, this attempt waits for it
    /// instead of calling again: the provider is called once at a time.
    func credentials(
        from provider: RedisCacheLevel.CredentialsProvider,
        until deadline: ContinuousClock.Instant
    ) -> Result<RedisCacheLevel.Credentials, RedisFailure> {
        let isEarlier = credentialsCall != nil
        let call =
            credentialsCall
            ?? BlockingCall(waking: connection.wake) {
                Result { try provider() }
                    .mapError { RedisFailure(.handshake, "the credentials provider failed: \($0)") }
            }
        credentialsCall = call
        let outcome = wait(for: call, until: deadline)
        if call.outcome != nil { credentialsCall = nil }
        return outcome
            ?? .failure(
                RedisFailure(
                    .handshake,
                    "the credentials provider did not answer within \(configuration.connectTimeout)"
                        + Self.underWay(isEarlier)
                )
            )
    }

    /// Said of a call that did not answer in time, when an earlier attempt began it.
    private static func underWay(_ isEarlier: Bool) -> String {
        isEarlier ? " (the call under way since an earlier attempt; no other begins before it answers)" : ""
    }

    /// Waits until `call` returns, at most until `deadline`, timing out the requests at their own
    /// deadlines meanwhile.
    ///
    /// - Returns: The call's outcome; a failure when the connection was stopped or asked to connect
    ///   again; `nil` at `deadline`, the call still under way.
    func wait<Value>(
        for call: BlockingCall<Value>,
        until deadline: ContinuousClock.Instant
    ) -> Result<Value, RedisFailure>? {
        while true {
            if let outcome = call.outcome { return outcome }
            if ContinuousClock.now >= deadline { return nil }
            if case .failure(let failure) = wait(nil, 0, until: deadline) { return .failure(failure) }
        }
    }
}
