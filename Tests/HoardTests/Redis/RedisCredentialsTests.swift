import Foundation
import HoardTestSupport
import Testing

@testable import Hoard
@testable import HoardRedis

/// `Configuration.credentials`: a provider asked at every (re)connection, so that a rotated password
/// reaches new connections without a rebuilt level.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason), .timeLimit(.minutes(10)))
struct RedisCredentialsTests {
    init() { TestLog.install() }

    /// Tries `attempt` until it succeeds (a reconnection after failed logins waits out a backoff),
    /// at most 600 s.
    private static func eventually(_ attempt: () async throws -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(600)
        while ContinuousClock.now < deadline {
            if (try? await attempt()) == true { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    @Test func aRotatedPasswordReachesTheConnectionsMadeAfterIt() async throws {
        _ = try RedisTestServer.required()
        let server = try RedisTestServer.start(configuration: ["requirepass first"])
        let current = Locked("first")
        let calls = Locked(0)
        var configuration = RedisCacheLevel.Configuration(host: "127.0.0.1", port: Int(server.port))
        configuration.credentials = .init {
            calls.withLock { $0 += 1 }
            return RedisCacheLevel.Credentials(password: current.withLock { $0 })
        }
        configuration.connectTimeout = .seconds(10)
        configuration.commandTimeout = .seconds(10)
        configuration.poolSize = 1
        let level = try RedisCacheLevel(configuration, namespace: "rotating")
        try await level.set(Data("v".utf8), forKey: "k")
        #expect(try await level.get("k") == Data("v".utf8))
        let callsBefore = calls.withLock { $0 }
        #expect(callsBefore >= 1)

        // The password rotates on the server, then in the provider; the level's connection is cut.
        let admin = try RedisCacheLevel.patient(url: "redis://:first@127.0.0.1:\(server.port)", namespace: "admin")
        _ = try await admin.send(RESPCommand("CONFIG", ["SET", "requirepass", "second"]))
        current.withLock { $0 = "second" }
        _ = try await admin.send(RESPCommand("CLIENT", ["KILL", "TYPE", "normal", "SKIPME", "yes"]))
        #expect(await Self.eventually { try await level.get("k") == Data("v".utf8) })
        #expect(calls.withLock { $0 } > callsBefore)
        // A level that still logs in with the first password is refused.
        let stale = try RedisCacheLevel(
            RedisCacheLevel.Configuration(host: "127.0.0.1", port: Int(server.port), password: "first"),
            namespace: "rotating"
        )
        await #expect(throws: CacheError.self) { try await stale.get("k") }
    }

    @Test func aProviderThatThrowsFailsTheConnectionAndTheCacheFallsBackToItsFetcher() async throws {
        _ = try RedisTestServer.required()
        let server = try RedisTestServer.start(configuration: ["requirepass s3cret"])
        struct VaultDown: Error {}
        let fails = Locked(true)
        var configuration = RedisCacheLevel.Configuration(host: "127.0.0.1", port: Int(server.port))
        configuration.credentials = .init {
            if fails.withLock({ $0 }) { throw VaultDown() }
            return RedisCacheLevel.Credentials(password: "s3cret")
        }
        configuration.connectTimeout = .seconds(10)
        configuration.commandTimeout = .seconds(10)
        let level = try RedisCacheLevel(configuration, namespace: "vault")
        let error = await #expect(throws: CacheError.self) { try await level.get("k") }
        #expect(error?.message.contains("credentials provider failed") == true)
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().sharedLevel(level).fetcher { "origin \($0)" }.build()
        #expect(try await cache.getOrFetch(forKey: "a") == "origin a")
        fails.withLock { $0 = false }
        #expect(
            await Self.eventually {
                try await level.set(Data("shared".utf8), forKey: "b")
                return try await level.get("b") == Data("shared".utf8)
            }
        )
        #expect(RedisCacheLevel.Configuration(host: "h").credentials == nil)
        #expect(configuration.credentials == configuration.credentials)
        #expect(configuration.credentials != .init { RedisCacheLevel.Credentials(password: "x") })
    }
}
