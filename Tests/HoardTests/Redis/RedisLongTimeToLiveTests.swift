import Foundation
import Hoard
import Testing

@testable import HoardRedis

/// A time to live given as a `Duration`, however long, is stored: the level sends the server one it
/// accepts, as it does for an expiry date far off.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason))
struct RedisLongTimeToLiveTests {
    /// The longest time to live whose milliseconds fit in an `Int64`: the server adds its clock to
    /// them, which no longer fits.
    static let longest = Duration.seconds(Int64.max / 1_000)

    @Test func theLongestTimeToLiveIsStoredNotRefused() async throws {
        let level = try RedisCacheLevelTests.level("long-ttl")
        try await level.set(Data("v".utf8), forKey: "k", timeToLive: Self.longest)
        #expect(try await level.get("k") == Data("v".utf8))
        let left = try #require(try await level.timeToLive(forKey: "k"))
        #expect(left > .seconds(86_400 * 365 * 1_000))
    }

    @Test func theLongestDefaultTimeToLiveIsStoredNotRefused() async throws {
        let server = try RedisTestServer.required()
        let level = try RedisCacheLevel.patient(
            url: server.url,
            namespace: "long-default-\(UUID().uuidString)",
            defaultTTL: Self.longest
        )
        try await level.set(Data("v".utf8), forKey: "k")
        #expect(try await level.get("k") == Data("v".utf8))
        #expect(try await level.timeToLive(forKey: "k") != nil)
    }

    @Test func aTimeToLiveWhoseMillisecondsOverflowDoesNotStopTheProgram() async {
        await #expect(processExitsWith: .success) {
            let level = try RedisCacheLevelTests.level("overflow-ttl")
            let overflowing = Self.longest + .milliseconds(900)
            try await level.set(Data("v".utf8), forKey: "k", timeToLive: overflowing)
            guard try await level.get("k") == Data("v".utf8) else { exit(1) }
        }
    }
}
