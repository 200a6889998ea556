import Foundation
import HoardTestSupport
import Testing

@testable import Hoard
@testable import HoardRedis

/// `rediss://` while a TLS handshake hangs or is slow: a proxy in front of a TLS server of the
/// test's own holds the server's half of a connection's handshake until the test lets it go.
///
/// The command timeout bounds each command, the connect timeout the handshake: a command sent
/// while its connection is still connecting times out at its own deadline and counts for the
/// circuit breaker, a handshake slower than the commands is waited for up to the connect timeout,
/// and a command that timed out before its connection was up is never written.
@Suite(
    .enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason),
    .enabled(if: TLSCertificates.isEnabled, "this build has no TLS: swift test --traits TLS"),
    .timeLimit(.minutes(10))
)
struct RedisTLSOutageTests {
    init() { TestLog.install() }

    /// A TLS server of the test's own, presenting the certificate for 127.0.0.1, with `"served"`
    /// under `k` in `namespace`; and a proxy in front of it that holds the server's half of the
    /// next connection's handshake.
    private static func heldServer(
        _ certificates: TLSCertificates,
        namespace: String
    ) async throws -> (RedisTestServer, HoldingProxy) {
        #expect(RedisCacheLevel.Configuration.TLS.isAvailable, "this build has no TLS")
        _ = try RedisTestServer.required()
        let server = try RedisTestServer.start(configuration: certificates.serverConfiguration(), tls: true)
        let direct = try RedisCacheLevel(Self.configuration(port: server.port, certificates), namespace: namespace)
        try await direct.set(Data("served".utf8), forKey: "k")
        let proxy = try HoldingProxy(upstreamPort: server.port)
        // Every TLS connection opens with a handshake record (0x16, then the version's major number,
        // 3) holding the client's hello: the replies to it are the server's half of the handshake.
        proxy.holdReplies(toRequestContaining: "\u{16}\u{03}")
        return (server, proxy)
    }

    /// A configuration for `rediss://127.0.0.1:<port>` trusting the certificates' authority, with
    /// one connection and a connect timeout no test waits for.
    private static func configuration(
        port: UInt16,
        _ certificates: TLSCertificates
    ) throws -> RedisCacheLevel.Configuration {
        var configuration = try RedisCacheLevel.Configuration(url: "rediss://127.0.0.1:\(port)")
        configuration.tls?.certificateAuthorityFile = certificates.authority
        configuration.connectTimeout = .seconds(3_600)
        configuration.commandTimeout = .seconds(10)
        configuration.poolSize = 1
        return configuration
    }

    private static func kind(_ error: CacheError?) -> RedisFailure.Kind? {
        (error?.underlyingError as? RedisFailure)?.kind
    }

    /// The error `body` throws, and whether it ended within ten minutes: far more than the command
    /// timeouts here, far less than the connect timeout.
    private static func failure(
        of body: @escaping @Sendable () async throws -> Void
    ) async -> (ended: Bool, error: CacheError?) {
        let outcome = Protected<CacheError?>(nil)
        let ended = DispatchSemaphore(value: 0)
        let task = Task {
            do {
                try await body()
            } catch {
                outcome.withLock { $0 = error as? CacheError }
            }
            ended.signal()
        }
        let inTime = await signalled(ended, within: 600)
        // A call left waiting for the connect timeout ends now, not an hour later.
        task.cancel()
        return (inTime, outcome.withLock { $0 })
    }

    /// The error of `level.get("k")`, as ``failure(of:)`` gives it.
    private static func failureOfGet(_ level: RedisCacheLevel) async -> (ended: Bool, error: CacheError?) {
        await failure { _ = try await level.get("k") }
    }

    @Test func aCommandSentWhileTheHandshakeHangsTimesOutAtItsDeadlineAndTheServerIsSkipped() async throws {
        let folder = TemporaryDirectory()
        let certificates = try await TLSCertificates.make(in: folder.url)
        let (server, proxy) = try await Self.heldServer(certificates, namespace: "hung")
        var configuration = try Self.configuration(port: proxy.port, certificates)
        configuration.commandTimeout = .milliseconds(200)
        let level = try RedisCacheLevel(configuration, namespace: "hung")
        #expect(await waitUntil { proxy.held > 0 })

        // Each command waits its own timeout, not the handshake's, and counts for the circuit
        // breaker: after three, the server is skipped.
        for _ in 0..<configuration.timeoutsBeforeSkipping {
            let (ended, error) = await Self.failureOfGet(level)
            try #require(ended, "a command waited past its timeout for the handshake")
            #expect(Self.kind(error) == .timeout, "\(error?.message ?? "no error")")
        }
        let (ended, error) = await Self.failureOfGet(level)
        #expect(ended && Self.kind(error) == .skipped, "\(error?.message ?? "no error")")

        // Once the handshake completes, a probe finds the server answering, and calls go to it again.
        proxy.release()
        #expect(try await eventually { try await level.get("k") } == Data("served".utf8))
        #expect(proxy.connectionCount == 1)
        withExtendedLifetime(server) {}
    }

    /// A distant server's handshake (TCP, TLS and the login take several round trips) may be slower
    /// than twice the command timeout: while commands keep coming and timing out, it is waited for
    /// up to the connect timeout, not given up and begun again, or the level never connects.
    @Test func aHandshakeSlowerThanTheCommandsIsWaitedForWhileTheyTimeOut() async throws {
        let folder = TemporaryDirectory()
        let certificates = try await TLSCertificates.make(in: folder.url)
        let (server, proxy) = try await Self.heldServer(certificates, namespace: "slow")
        var configuration = try Self.configuration(port: proxy.port, certificates)
        configuration.commandTimeout = .milliseconds(200)
        configuration.timeoutsBeforeSkipping = 0
        let level = try RedisCacheLevel(configuration, namespace: "slow")
        #expect(await waitUntil { proxy.held > 0 })

        // Commands time out one after another for well over twice the command timeout; none is
        // served, since the level makes no other connection.
        let held = ContinuousClock.now
        var timeouts = 0
        while timeouts < 5 || held.duration(to: .now) < configuration.commandTimeout * 4 {
            let (ended, error) = await Self.failureOfGet(level)
            try #require(ended && Self.kind(error) == .timeout, "\(error?.message ?? "no error")")
            timeouts += 1
        }
        #expect(proxy.connectionCount == 1)

        // The server's half comes through: the same connection finishes its handshake and serves.
        proxy.release()
        #expect(try await eventually { try await level.get("k") } == Data("served".utf8))
        #expect(proxy.connectionCount == 1)
        withExtendedLifetime(server) {}
    }

    /// A pool whose one connection hangs in its handshake (a packet lost on the way, a server slow
    /// to accept) while another serves: the commands go to the one that serves, none waits out its
    /// timeout on the one that is not up.
    @Test func aHandshakeThatHangsOnOneConnectionLeavesTheCommandsToTheOneThatServes() async throws {
        let folder = TemporaryDirectory()
        let certificates = try await TLSCertificates.make(in: folder.url)
        let (server, proxy) = try await Self.heldServer(certificates, namespace: "pooled")
        var configuration = try Self.configuration(port: proxy.port, certificates)
        configuration.poolSize = 2
        let level = try RedisCacheLevel(configuration, namespace: "pooled")
        #expect(await waitUntil { proxy.held > 0 && proxy.connectionCount == 2 })
        #expect(try await eventually { try await level.get("k") } == Data("served".utf8))

        for _ in 0..<6 {
            let (ended, error) = await Self.failureOfGet(level)
            try #require(ended && error == nil, "\(error?.message ?? "no error")")
        }
        #expect(proxy.held > 0, "the handshake was held throughout")
        proxy.release()
        withExtendedLifetime(server) {}
    }

    /// A command that timed out while its connection was connecting was never written, and never
    /// is: its caller was told it failed, and a later write of the key through another connection
    /// must not be overwritten by it once the connection is up.
    @Test func aWriteThatTimedOutBeforeItsConnectionWasUpIsNeverSent() async throws {
        let folder = TemporaryDirectory()
        let certificates = try await TLSCertificates.make(in: folder.url)
        let (server, proxy) = try await Self.heldServer(certificates, namespace: "stale")
        var configuration = try Self.configuration(port: proxy.port, certificates)
        configuration.commandTimeout = .seconds(3)
        let level = try RedisCacheLevel(configuration, namespace: "stale")
        #expect(await waitUntil { proxy.held > 0 })

        let (ended, error) = await Self.failure { try await level.set(Data("stale".utf8), forKey: "k") }
        try #require(ended && Self.kind(error) == .timeout, "\(error?.message ?? "no error")")
        let direct = try RedisCacheLevel(Self.configuration(port: server.port, certificates), namespace: "stale")
        try await direct.set(Data("fresh".utf8), forKey: "k")
        proxy.release()
        // The connection writes whatever it still holds before the first command it serves.
        #expect(try await eventually { try await level.get("k") } == Data("fresh".utf8))
        #expect(try await direct.get("k") == Data("fresh".utf8))
        #expect(proxy.connectionCount == 1)
    }
}
