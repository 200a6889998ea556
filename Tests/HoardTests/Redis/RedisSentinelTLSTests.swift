import Foundation
import HoardTestSupport
import Testing

@testable import Hoard
@testable import HoardRedis

/// `RedisCacheLevel(sentinels:primaryName:namespace:)` with `rediss://` URLs: the level's TLS
/// settings serve the Sentinels and the primary alike, and settings the Sentinels refuse for good
/// fail the cache's `build()` with their reason, as they do for a single server or a cluster.
///
/// They run in a build with TLS (on Linux, the package trait: `swift test --traits TLS`);
/// `HOARD_REQUIRE_TLS=1` makes a build without it fail them instead of skipping.
@Suite(
    .enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason),
    .enabled(if: TLSCertificates.isEnabled, "this build has no TLS: swift test --traits TLS"),
    .timeLimit(.minutes(10))
)
struct RedisSentinelTLSTests {
    init() { TestLog.install() }

    /// A primary and a Sentinel watching it, both listening only on TLS ports with the certificate
    /// for 127.0.0.1 (the Sentinel reaches the primary over TLS too: `tls-replication`).
    private static func tlsGroup(_ certificates: TLSCertificates) throws -> (RedisTestServer, RedisTestServer) {
        #expect(RedisCacheLevel.Configuration.TLS.isAvailable, "this build has no TLS")
        _ = try RedisTestServer.required()
        let primary = try RedisTestServer.start(configuration: certificates.serverConfiguration(), tls: true)
        let sentinel = try RedisTestServer.start(
            configuration: certificates.serverConfiguration() + [
                "tls-replication yes",
                "sentinel monitor \(RedisSentinelTests.name) 127.0.0.1 \(primary.port) 1",
            ],
            tls: true,
            sentinel: true
        )
        return (primary, sentinel)
    }

    /// A patient level on the group's primary, trusting `authority`.
    private static func level(sentinel: RedisTestServer, authority: String) throws -> RedisCacheLevel {
        var configuration = try RedisCacheLevel.Configuration(
            sentinels: ["rediss://127.0.0.1:\(sentinel.port)"],
            primaryName: RedisSentinelTests.name
        )
        configuration.tls?.certificateAuthorityFile = authority
        configuration.connectTimeout = .seconds(10)
        configuration.commandTimeout = .seconds(10)
        return try RedisCacheLevel(configuration, namespace: "sentinel-tls")
    }

    /// A level straight to one TLS server of the test's (a Sentinel, or a data server).
    private static func direct(_ server: RedisTestServer, _ certificates: TLSCertificates) throws -> RedisCacheLevel {
        var configuration = try RedisCacheLevel.Configuration(url: "rediss://127.0.0.1:\(server.port)")
        configuration.tls?.certificateAuthorityFile = certificates.authority
        configuration.connectTimeout = .seconds(10)
        configuration.commandTimeout = .seconds(10)
        return try RedisCacheLevel(configuration, namespace: "sentinel-tls")
    }

    /// A new primary announced while a connection's TLS handshake with the old one hangs (stopped,
    /// its kernel still accepts the connection): the handshake is given up for the new primary at
    /// once, not after the connect timeout (an hour here), so the write lands within its timeout.
    @Test func aHandshakeWithAStoppedPrimaryIsGivenUpWhenTheSentinelsMoveIt() async throws {
        let folder = TemporaryDirectory()
        let certificates = try await TLSCertificates.make(in: folder.url)
        _ = try RedisTestServer.required()
        let lines = certificates.serverConfiguration() + ["tls-replication yes"]
        let primary = try RedisTestServer.start(configuration: lines, tls: true)
        let replica = try RedisTestServer.start(
            configuration: lines + ["replicaof 127.0.0.1 \(primary.port)"],
            tls: true
        )
        let name = RedisSentinelTests.name
        let sentinel = try RedisTestServer.start(
            configuration: lines + [
                "sentinel monitor \(name) 127.0.0.1 \(primary.port) 1",
                "sentinel down-after-milliseconds \(name) 1000",
                "sentinel failover-timeout \(name) 3000",
            ],
            tls: true,
            sentinel: true
        )
        // The Sentinel knows the replica, in sync: a failover has someone to promote.
        let asked = try Self.direct(sentinel, certificates)
        #expect(
            await waitUntilAsync {
                guard case .array(let replicas)? = try? await asked.send(RESPCommand("SENTINEL", ["REPLICAS", name])),
                    replicas.count == 1
                else { return false }
                let fields = RedisSentinelTests.strings(replicas[0])
                guard let link = fields.firstIndex(of: "master-link-status"), link + 1 < fields.count else {
                    return false
                }
                return fields[link + 1] == "ok"
            }
        )

        primary.pause()
        defer { primary.resume() }
        var configuration = try RedisCacheLevel.Configuration(
            sentinels: ["rediss://127.0.0.1:\(sentinel.port)"],
            primaryName: name
        )
        configuration.tls?.certificateAuthorityFile = certificates.authority
        configuration.connectTimeout = .seconds(3_600)
        configuration.commandTimeout = .seconds(60)
        configuration.poolSize = 1
        let level = try RedisCacheLevel(configuration, namespace: "sentinel-tls")
        try await level.set(Data("after".utf8), forKey: "k")
        #expect(try await Self.direct(replica, certificates).get("k") == Data("after".utf8))
        #expect(RedisSentinelTests.heardOfTheMove(to: replica))
        withExtendedLifetime((primary, sentinel)) {}
    }

    @Test func sentinelsWhoseCertificateIsRefusedFailBuildWithTheReason() async throws {
        let folder = TemporaryDirectory()
        let certificates = try await TLSCertificates.make(in: folder.url)
        let (primary, sentinel) = try Self.tlsGroup(certificates)

        // No Sentinel can be asked for the primary: a certificate refused cannot pass by itself.
        let untrusted = try Self.level(sentinel: sentinel, authority: certificates.otherAuthority)
        let error = try #require(throws: CacheError.self) {
            try folder.stringBuilder("untrusted").sharedLevel(untrusted).build()
        }
        #expect(error.code == .invalidConfiguration)
        #expect(error.message.contains("certificate was not accepted"), "\(error.message)")
        let failure = try await #require(throws: CacheError.self) { try await untrusted.get("k") }
        #expect(failure.code == .network)
        #expect(failure.message.contains("certificate was not accepted"), "\(failure.message)")

        // Trusted, the same Sentinel names the primary, reached over TLS too.
        let trusted = try Self.level(sentinel: sentinel, authority: certificates.authority)
        let cache = try folder.stringBuilder("trusted").sharedLevel(trusted).build()
        try await cache.save("v", forKey: "k")
        #expect(try await trusted.get("k").isEmpty == false)
        withExtendedLifetime((primary, sentinel)) {}
    }
}
