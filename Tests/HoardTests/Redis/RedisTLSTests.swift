import Foundation
import HoardTestSupport
import Testing

@testable import Hoard
@testable import HoardRedis

/// `rediss://`, against TLS servers of the tests' own.
///
/// The level verifies a TLS server's chain, dates and name, shows a client certificate when the
/// server requires one, carries large values and pipelines over TLS, keeps coherence on its
/// tracking connection, and reconnects to a restarted server. Each test starts a TLS
/// `redis-server` of its own with certificates the `openssl` tool makes for it.
///
/// They run in a build with TLS (on Linux, the package trait: `swift test --traits TLS`);
/// `HOARD_REQUIRE_TLS=1` makes a build without it fail them instead of skipping.
@Suite(
    .enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason),
    .enabled(if: TLSCertificates.isEnabled, "this build has no TLS: swift test --traits TLS"),
    .timeLimit(.minutes(10))
)
struct RedisTLSTests {
    init() { TestLog.install() }

    /// A TLS server of the test's own, with the certificates in `folder`.
    private static func server(
        _ certificates: TLSCertificates,
        _ certificate: TLSCertificates.Server = .good,
        clientsMustShowOne: Bool = false,
        port: UInt16? = nil,
        configuration lines: [String] = []
    ) throws -> RedisTestServer {
        #expect(RedisCacheLevel.Configuration.TLS.isAvailable, "this build has no TLS")
        _ = try RedisTestServer.required()
        return try RedisTestServer.start(
            configuration: certificates.serverConfiguration(certificate, clientsMustShowOne: clientsMustShowOne)
                + lines,
            port: port,
            tls: true
        )
    }

    /// A patient configuration for `rediss://127.0.0.1:<port>` trusting `authority`.
    private static func configuration(
        port: UInt16,
        authority: String?,
        _ extra: String = ""
    ) throws -> RedisCacheLevel.Configuration {
        var configuration = try RedisCacheLevel.Configuration(url: "rediss://\(extra)127.0.0.1:\(port)")
        configuration.tls?.certificateAuthorityFile = authority
        configuration.connectTimeout = .seconds(10)
        configuration.commandTimeout = .seconds(10)
        return configuration
    }

    @Test func redissURLsAskForTLSAndBadSettingsAreRefused() throws {
        let configuration = try RedisCacheLevel.Configuration(url: "rediss://:pw@cache.example:6380/1")
        #expect(configuration.tls == RedisCacheLevel.Configuration.TLS())
        #expect(configuration.tls?.insecurelySkipsVerification == false)
        #expect(configuration.host == "cache.example" && configuration.port == 6380 && configuration.database == 1)
        #expect(try RedisCacheLevel.Configuration(url: "redis://cache.example").tls == nil)
        var missingFile = configuration
        missingFile.tls?.certificateAuthorityFile = "/nonexistent/ca.pem"
        var keyWithoutCertificate = configuration
        keyWithoutCertificate.tls?.clientKeyFile = "/nonexistent/client.key"
        var overSocket = RedisCacheLevel.Configuration(socketPath: "/tmp/redis.sock")
        overSocket.tls = .init()
        for bad in [missingFile, keyWithoutCertificate, overSocket] {
            #expect(throws: CacheError.invalidConfiguration) { try RedisCacheLevel(bad, namespace: "n") }
        }
    }

    @Test func aGoodChainCarriesLoginsLargeValuesAndPipelinedCallers() async throws {
        let folder = TemporaryDirectory()
        let certificates = try await TLSCertificates.make(in: folder.url)
        let server = try Self.server(certificates, configuration: ["requirepass s3cret"])
        let level = try RedisCacheLevel(
            Self.configuration(port: server.port, authority: certificates.authority, ":s3cret@"),
            namespace: "tls"
        )
        try await level.set(Data("hello".utf8), forKey: "a")
        #expect(try await level.get("a") == Data("hello".utf8))
        // Larger than TLS records (16 KiB) and than the read buffer (64 KiB): many records each way.
        let large = Data((0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        try await level.set(large, forKey: "large")
        #expect(try await level.get("large") == large)
        // Many callers at once share the pooled connections' pipelines.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<200 {
                group.addTask {
                    let value = Data("value \(index)".utf8) + Data(count: index * 97)
                    try await level.set(value, forKey: "k\(index)")
                    #expect(try await level.get("k\(index)") == value)
                }
            }
            try await group.waitForAll()
        }
        // The same server refuses the wrong password over TLS as it would over TCP.
        let wrong = try RedisCacheLevel(
            Self.configuration(port: server.port, authority: certificates.authority, ":wrong@"),
            namespace: "tls"
        )
        #expect(throws: CacheError.invalidConfiguration) {
            try folder.stringBuilder("wrong").sharedLevel(wrong).build()
        }
    }

    @Test func aServerSignedByAnotherAuthorityIsRefusedUnlessVerificationIsSkipped() async throws {
        let folder = TemporaryDirectory()
        let certificates = try await TLSCertificates.make(in: folder.url)
        let server = try Self.server(certificates)
        let untrusted = try RedisCacheLevel(
            Self.configuration(port: server.port, authority: certificates.otherAuthority),
            namespace: "tls"
        )
        let error = try #require(throws: CacheError.self) {
            try folder.stringBuilder("untrusted").sharedLevel(untrusted).build()
        }
        #expect(error.code == .invalidConfiguration)
        #expect(error.message.contains("certificate was not accepted"), "\(error.message)")
        await #expect(throws: CacheError.self) { try await untrusted.get("a") }
        // The system's trust store does not know the test authority either.
        let system = try RedisCacheLevel(Self.configuration(port: server.port, authority: nil), namespace: "tls")
        await #expect(throws: CacheError.self) { try await system.get("a") }
        var insecure = try Self.configuration(port: server.port, authority: certificates.otherAuthority)
        insecure.tls?.insecurelySkipsVerification = true
        let unverified = try RedisCacheLevel(insecure, namespace: "tls")
        try await unverified.set(Data("x".utf8), forKey: "a")
        #expect(try await unverified.get("a") == Data("x".utf8))
    }

    /// A plain port reads the client's first TLS message as an unfinished command and says nothing:
    /// the attempt ends at the connect timeout, and the level fails open like for a server that is down.
    @Test func aServerThatDoesNotSpeakTLSIsAMissAfterTheConnectTimeout() async throws {
        #expect(RedisCacheLevel.Configuration.TLS.isAvailable, "this build has no TLS")
        let plain = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        var configuration = try Self.configuration(port: plain.port, authority: nil)
        configuration.connectTimeout = .milliseconds(500)
        configuration.commandTimeout = .seconds(1)
        let level = try RedisCacheLevel(configuration, namespace: "tls")
        let error = try await #require(throws: CacheError.self) { try await level.get("a") }
        #expect(error.code == .network)
        #expect(error.message.contains("TLS handshake"), "\(error.message)")
        let cache = try folder.stringBuilder().sharedLevel(level).fetcher { "origin \($0)" }.build()
        #expect(try await cache.getOrFetch(forKey: "k") == "origin k")
    }

    @Test func aCertificateForAnotherNameIsRefusedUnlessThatNameIsExpected() async throws {
        let folder = TemporaryDirectory()
        let certificates = try await TLSCertificates.make(in: folder.url)
        let server = try Self.server(certificates, .otherName)
        let byAddress = try RedisCacheLevel(
            Self.configuration(port: server.port, authority: certificates.authority),
            namespace: "tls"
        )
        let error = try #require(throws: CacheError.self) {
            try folder.stringBuilder("address").sharedLevel(byAddress).build()
        }
        #if !canImport(Network)
        // OpenSSL's words; Apple's trust evaluation says it its own way.
        #expect(error.message.contains("mismatch"), "\(error.message)")
        #endif
        var named = try Self.configuration(port: server.port, authority: certificates.authority)
        named.tls?.serverName = "redis.test"
        let byName = try RedisCacheLevel(named, namespace: "tls")
        try await byName.set(Data("named".utf8), forKey: "a")
        #expect(try await byName.get("a") == Data("named".utf8))
    }

    @Test func anExpiredCertificateIsRefused() async throws {
        let folder = TemporaryDirectory()
        let certificates = try await TLSCertificates.make(in: folder.url)
        let server = try Self.server(certificates, .expired)
        let level = try RedisCacheLevel(
            Self.configuration(port: server.port, authority: certificates.authority),
            namespace: "tls"
        )
        let error = try #require(throws: CacheError.self) { try folder.stringBuilder().sharedLevel(level).build() }
        #expect(error.message.contains("expired"), "\(error.message)")
        // A call fails at once with the level's error, which a cache takes for a miss.
        let failure = try await #require(throws: CacheError.self) { try await level.get("a") }
        #expect(failure.code == .network)
    }

    @Test(.enabled(if: TLSCertificates.clientCertificatesAreSupported, "no client certificate on Apple platforms yet"))
    func mutualTLSNeedsTheClientCertificate() async throws {
        let folder = TemporaryDirectory()
        let certificates = try await TLSCertificates.make(in: folder.url)
        let server = try Self.server(certificates, clientsMustShowOne: true)
        let anonymous = try RedisCacheLevel(
            Self.configuration(port: server.port, authority: certificates.authority),
            namespace: "tls"
        )
        #expect(throws: CacheError.invalidConfiguration) {
            try folder.stringBuilder("anonymous").sharedLevel(anonymous).build()
        }
        var configuration = try Self.configuration(port: server.port, authority: certificates.authority)
        configuration.tls?.clientCertificateFile = certificates.clientCertificate
        configuration.tls?.clientKeyFile = certificates.clientKey
        let identified = try RedisCacheLevel(configuration, namespace: "tls")
        try await identified.set(Data("mine".utf8), forKey: "a")
        #expect(try await identified.get("a") == Data("mine".utf8))
        // A key that is not the certificate's is refused before any connection.
        configuration.tls?.clientKeyFile = folder.url.appendingPathComponent("other-ca.key").path
        let mismatched = try RedisCacheLevel(configuration, namespace: "tls")
        await #expect(throws: CacheError.self) { try await mismatched.get("a") }
    }

    /// A PKCS #12 file gives the certificate and its key at once, opened with its password; the
    /// form Apple platforms take.
    @Test func aPKCS12ClientCertificateIsShownAndAWrongPasswordIsRefused() async throws {
        let folder = TemporaryDirectory()
        let certificates = try await TLSCertificates.make(in: folder.url)
        let server = try Self.server(certificates, clientsMustShowOne: true)
        var configuration = try Self.configuration(port: server.port, authority: certificates.authority)
        configuration.tls?.clientCertificateFile = certificates.clientBundle
        configuration.tls?.clientCertificatePassword = certificates.clientBundlePassword
        let identified = try RedisCacheLevel(configuration, namespace: "tls")
        let cache = try folder.stringBuilder("bundle").sharedLevel(identified).build()
        try await identified.set(Data("mine".utf8), forKey: "a")
        #expect(try await identified.get("a") == Data("mine".utf8))
        withExtendedLifetime(cache) {}
        // A wrong password is a misconfiguration that build() reports, naming the file.
        configuration.tls?.clientCertificatePassword = "not-the-password"
        let locked = try RedisCacheLevel(configuration, namespace: "tls")
        let error = try #require(throws: CacheError.self) {
            try folder.stringBuilder("locked").sharedLevel(locked).build()
        }
        #expect(error.code == .invalidConfiguration)
        #expect(error.message.contains("PKCS #12") && error.message.contains("client.p12"), "\(error.message)")
        // The file holds its key: a key file beside it is refused when the level is made.
        configuration.tls?.clientCertificatePassword = certificates.clientBundlePassword
        configuration.tls?.clientKeyFile = certificates.clientKey
        let both = try #require(throws: CacheError.self) { try RedisCacheLevel(configuration, namespace: "tls") }
        #expect(both.message.contains("holds its key"), "\(both.message)")
    }

    /// A server with `tls-auth-clients optional` asks every client for a certificate and serves
    /// those without one: a login it is slow to answer is a passing failure, not a missing
    /// certificate.
    @Test func aServerThatOnlyAsksForACertificateIsNotRefusedForBeingSlow() async throws {
        let folder = TemporaryDirectory()
        let certificates = try await TLSCertificates.make(in: folder.url)
        let server = try Self.server(certificates, configuration: ["tls-auth-clients optional"])
        let admin = try RedisCacheLevel(
            Self.configuration(port: server.port, authority: certificates.authority),
            namespace: "tls"
        )
        try await admin.set(Data("served".utf8), forKey: "a")
        // While the server holds every command, a new connection's TLS handshake passes (the
        // certificate request included) and its HELLO gets no answer in time.
        _ = try await admin.send(RESPCommand("CLIENT", ["PAUSE", "3000", "ALL"]))
        // The login times out well before the check's PING would: its failure is what the PING
        // gets.
        var hurried = try Self.configuration(port: server.port, authority: certificates.authority)
        hurried.connectTimeout = .milliseconds(300)
        let level = try RedisCacheLevel(hurried, namespace: "tls")
        _ = try folder.stringBuilder("hurried").sharedLevel(level).build()
        // Once the server answers again, the same level serves.
        _ = try await admin.send(RESPCommand("CLIENT", ["UNPAUSE"]))
        var served: Data?
        for _ in 0..<600 where served == nil {
            served = try? await level.get("a")
            if served == nil { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(served == Data("served".utf8))
    }

    @Test func aRestartedServerIsReachedAgainAndCoherenceComesBack() async throws {
        let folder = TemporaryDirectory()
        let certificates = try await TLSCertificates.make(in: folder.url)
        var server = try Self.server(certificates)
        let port = server.port
        let namespace = "tls-\(UUID().uuidString)"
        func cache(_ name: String) throws -> Cache<String> {
            var configuration = try Self.configuration(port: port, authority: certificates.authority)
            configuration.clientName = "\(name)-\(UUID().uuidString.prefix(8))"
            // A loaded run must not count the tracking connection lost before the kill (a killed
            // server closes it): a loss would drop the copy looked at and could miss an invalidation.
            configuration.trackingPingTimeout = .seconds(600)
            return try folder.stringBuilder(name)
                .sharedLevel(try RedisCacheLevel(configuration, namespace: namespace))
                .coherence(.invalidations(maxLocalAge: .seconds(86_400)))
                .build()
        }
        let reader = try cache("reader")
        let writer = try cache("writer")
        #expect(await waitUntil { reader.isCoherent && writer.isCoherent })
        // Coherence over TLS: the tracking connection hears the other instance's write.
        try await RedisCoherenceTests.save("old", forKey: "k", on: writer, heardBy: reader)
        #expect(try await reader.getOrFetch(forKey: "k") == "old")
        try await writer.save("new", forKey: "k")
        #expect(await waitUntil { reader.memory?.peek("k")?.value != "old" })
        #expect(try await reader.getOrFetch(forKey: "k") == "new")

        server.kill()
        #expect(await waitUntil { !reader.isCoherent })
        // The port may still be held for a moment: by the level's own attempts to reconnect (a
        // connection to a port nobody listens on can be made to itself, from that very port).
        server = try await eventually { try Self.server(certificates, port: port) }
        #expect(await waitUntil { reader.isCoherent && writer.isCoherent })
        // Each pooled connection comes back on its own schedule (a backoff of at most a second).
        try await eventually { try await writer.save("after", forKey: "k") }
        #expect(try await eventually { try await reader.getOrFetch(forKey: "k") } == "after")
        try await RedisCoherenceTests.save("final", forKey: "k", on: writer, heardBy: reader)
        #expect(try await reader.getOrFetch(forKey: "k") == "final")
        withExtendedLifetime(server) {}
    }
}

/// A build without TLS (on Linux, without the package trait) refuses `rediss://` when the level is
/// made, saying how to get TLS, rather than failing at each call.
@Suite(.enabled(if: !RedisCacheLevel.Configuration.TLS.isAvailable, "this build has TLS"))
struct RedisWithoutTLSTests {
    @Test func aLevelThatAsksForTLSIsRefusedWithHowToGetIt() throws {
        let error = try #require(throws: CacheError.self) {
            try RedisCacheLevel(url: "rediss://127.0.0.1:6380", namespace: "n")
        }
        #expect(error.code == .invalidConfiguration)
        #expect(error.message.contains("trait TLS") && error.message.contains("libssl-dev"), "\(error.message)")
    }
}
