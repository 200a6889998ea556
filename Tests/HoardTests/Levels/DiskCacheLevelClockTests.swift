import Foundation
import Testing

@testable import Hoard

/// A disk level tells expired entries by the clock it is given, not the system's.
@Suite struct DiskCacheLevelClockTests {
    @Test func anEntryIsLiveBeforeItsExpiryAndAMissFromItOnTheLevelsClock() async throws {
        let folder = TemporaryDirectory()
        let clock = ManualClock()
        let cache = try folder.stringBuilder().clock(clock.read).build()
        cache.set("v", forKey: "k", expiry: .seconds(10))
        await cache.flush()
        let level = DiskCacheLevel<String, String>(
            directory: folder.container(),
            capacity: 1_000,
            serializer: StringSerializer(),
            clock: clock.read
        )
        clock.advance(by: 9)
        #expect(try await level.get("k") == "v")
        clock.advance(by: 1)
        await #expect(throws: CacheError.notFound) { try await level.get("k") }
    }

    @Test func aPendingWriteIsJudgedByTheSameClock() async throws {
        let folder = TemporaryDirectory()
        let clock = ManualClock()
        let cache = try folder.stringBuilder().clock(clock.read).build()
        let level = DiskCacheLevel<String, String>(
            directory: folder.container(),
            capacity: 1_000,
            serializer: StringSerializer(),
            clock: clock.read
        )
        cache.set("v", forKey: "k", expiry: .seconds(10))
        #expect(try await level.get("k") == "v")
        clock.advance(by: 10)
        await #expect(throws: CacheError.notFound) { try await level.get("k") }
    }
}
