import Foundation
import HoardRedis
import HoardTestSupport
import Testing

@testable import Hoard

/// A cache whose clock is not the host's (``CacheBuilder/clock(_:)``) over a Redis server: the time
/// the server keeps a value is what the value has left by the cache's clock.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason))
struct RedisInjectedClockTests {
    // `offset`: how far the cache's clock is ahead of the host's (behind when negative).
    @Test(arguments: [-7_200.0, 7_200.0])
    func theServerKeepsAValueForWhatItHasLeftByTheCachesClock(offset: TimeInterval) async throws {
        let server = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let level = try RedisCacheLevel.patient(url: server.url, namespace: "clock-\(UUID().uuidString)")
        let cache = try folder.stringBuilder().sharedLevel(level).clock { Date().addingTimeInterval(offset) }.build()
        // Live for an hour by the cache's clock, which decides every expiry.
        try await cache.save("v", forKey: "k", expiry: .seconds(3_600))
        #expect(cache.entry(forKey: "k")?.isExpired == false)
        // The server has it, for that hour at most (less what a loaded run took since the save).
        // (`nil`: the server does not have it, or keeps it for ever.)
        let left = try? await level.timeToLive(forKey: "k")
        let seconds = left.map { $0.components.seconds }
        let kept = seconds.map { $0 > 600 && $0 <= 3_600 } == true
        #expect(kept, "the server keeps it for \(String(describing: seconds)) s")
    }
}
