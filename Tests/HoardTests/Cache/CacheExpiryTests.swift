import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

private struct Offline: Error {}

/// Expiry, driven by a manual clock: nothing here sleeps.
@Suite(.validatesCacheInvariants) struct CacheExpiryTests {
    @Test(arguments: [0, 1_000])
    func aValueIsLiveUntilItsExpiryInstantAndExpiredFromThen(ramCount: Int) async throws {
        let folder = TemporaryDirectory()
        let clock = ManualClock()
        let cache = try folder.stringBuilder().maxRamCount(ramCount).clock(clock.read).expiry(.seconds(10)).build()
        cache["k"] = "v"
        clock.advance(by: 9.999)
        #expect(cache["k"] == "v")
        #expect(cache.contains("k"))
        #expect(cache.allKeys == ["k"])
        clock.advance(by: 0.001)
        #expect(cache["k"] == nil)
        #expect(cache.value(forKey: "k") == nil)
        #expect(!cache.contains("k"))
        #expect(cache.allKeys.isEmpty)
    }

    @Test func aPerEntryExpiryOverridesTheDefault() async throws {
        let folder = TemporaryDirectory()
        let clock = ManualClock()
        let start = clock.now
        let cache = try folder.stringBuilder().clock(clock.read).expiry(.seconds(100)).build()
        cache.set("short", forKey: "short", expiry: .seconds(10))
        cache["default"] = "default"
        cache.set("forever", forKey: "forever", expiry: .never)
        cache.set("dated", forKey: "dated", expiry: .date(start.addingTimeInterval(50)))
        #expect(cache.entry(forKey: "short")?.expiresAt == start.addingTimeInterval(10))
        #expect(cache.entry(forKey: "default")?.expiresAt == start.addingTimeInterval(100))
        #expect(cache.entry(forKey: "forever")?.expiresAt == nil)
        clock.advance(by: 10)
        #expect(Set(cache.allKeys) == ["default", "forever", "dated"])
        clock.advance(by: 40)
        #expect(Set(cache.allKeys) == ["default", "forever"])
        clock.advance(by: 50)
        #expect(cache.allKeys == ["forever"])
        clock.advance(by: 1e9)
        #expect(cache["forever"] == "forever")
    }

    @Test func theExpiryDateIsStoredOnDiskAndSurvivesARestart() async throws {
        let folder = TemporaryDirectory()
        let clock = ManualClock()
        let start = clock.now
        do {
            let cache = try folder.stringBuilder().clock(clock.read).build()
            cache.set("v", forKey: "k", expiry: .seconds(10))
            cache["kept"] = "forever"
            await cache.flush()
        }
        clock.advance(by: 5)
        do {
            // Released before the next store opens the folder: two stores on one folder are two processes.
            let reopened = try folder.stringBuilder().maxRamCount(0).clock(clock.read).build(sharingStore: false)
            let entry = try #require(reopened.entry(forKey: "k"))
            #expect(
                entry == CacheEntry(value: "v", expiresAt: start.addingTimeInterval(10), isExpired: false, level: .disk)
            )
            #expect(reopened.contains("k"))
            clock.advance(by: 5)
            // Known from the saved index alone.
            #expect(!reopened.contains("k"))
            #expect(reopened.allKeys == ["kept"])
        }
        // After the index is lost, from the entry files.
        try FileManager.default.removeItem(at: folder.container().appendingPathComponent(".hoard-index"))
        let rebuilt = try folder.stringBuilder().maxRamCount(0).clock(clock.read).build(sharingStore: false)
        #expect(rebuilt.allKeys == ["kept"])
        #expect(rebuilt["k"] == nil)
        #expect(rebuilt.diskCount == 1)
        #expect(folder.entryFiles().count == 1)
    }

    @Test func anExpiredValueIsRemovedOnAccessAndCountsAsAnEviction() async throws {
        let folder = TemporaryDirectory()
        let clock = ManualClock()
        let delegate = RecordingDelegate<String>()
        let cache = try folder.stringBuilder().clock(clock.read).expiry(.seconds(1)).delegate(delegate).build()
        cache["k"] = "v"
        await cache.flush()
        clock.advance(by: 1)
        #expect(cache["k"] == nil)
        #expect(cache.memoryCount == 0)
        #expect(cache.diskCount == 0)
        #expect(folder.entryFiles().isEmpty)
        #expect(delegate.memoryEvictions == ["k"])
        #expect(delegate.diskEvictions == ["k"])
        let statistics = cache.statistics
        #expect(statistics.evictions(for: .expired) == 2)
        #expect(statistics.evictionsByReason == [.expired: 2])
        #expect(statistics.memoryHits == 0)
        #expect(statistics.misses == 1)
        // A new value for the key is live again.
        cache["k"] = "w"
        #expect(cache["k"] == "w")
    }

    @Test func aSetMadeAfterTheExpiredReadIsNotRemovedByIt() async throws {
        let folder = TemporaryDirectory()
        let clock = ManualClock()
        let cache = try folder.stringBuilder().clock(clock.read).build()
        cache.set("old", forKey: "k", expiry: .seconds(1))
        await cache.flush()
        clock.advance(by: 2)
        cache.set("new", forKey: "k", expiry: .seconds(100))
        #expect(cache["k"] == "new")
        await cache.flush()
        let reopened = try folder.stringBuilder().maxRamCount(0).clock(clock.read).build(sharingStore: false)
        #expect(reopened["k"] == "new")
    }

    @Test func getOrFetchFetchesAnExpiredValueAgain() async throws {
        let folder = TemporaryDirectory()
        let clock = ManualClock()
        let fetches = Counter()
        let cache = try folder.stringBuilder().clock(clock.read).expiry(.seconds(60))
            .fetcher { key in
                fetches.increment()
                return "\(key) #\(fetches.value)"
            }.build()
        #expect(try await cache.getOrFetch(forKey: "k") == "k #1")
        #expect(try await cache.getOrFetch(forKey: "k") == "k #1")
        clock.advance(by: 60)
        #expect(try await cache.getOrFetch(forKey: "k") == "k #2")
        #expect(try await cache.get("k") == "k #2")
        #expect(fetches.value == 2)
        #expect(cache.entry(forKey: "k")?.expiresAt == clock.now.addingTimeInterval(60))
    }

    @Test func aFailedFetchServesTheStaleValueWhenAskedTo() async throws {
        let folder = TemporaryDirectory()
        let clock = ManualClock()
        let online = Protected(true)
        let builder = folder.stringBuilder().clock(clock.read).expiry(.seconds(60))
            .fetcher { key in
                guard online.withLock({ $0 }) else { throw Offline() }
                return "fresh \(key)"
            }
        let cache = try builder.serveStaleOnFetchFailure(true).build()
        let events = cache.events
        #expect(try await cache.getOrFetch(forKey: "k") == "fresh k")
        let expiredAt = clock.now.addingTimeInterval(60)
        await cache.flush()
        online.withLock { $0 = false }
        clock.advance(by: 61)
        #expect(cache["k"] == nil)
        #expect(try await cache.getOrFetch(forKey: "k") == "fresh k")
        let entry = try #require(cache.entry(forKey: "k"))
        #expect(entry.isExpired)
        #expect(entry.expiresAt == expiredAt)
        let seen = await events.collect { $0.kind == .servedStale }
        #expect(seen.last == .servedStale(key: "k", value: "fresh k", expiredAt: expiredAt))
        #expect(cache.statistics.fetchFailures == 1)
        // Also after a restart, from disk.
        let reopened = try builder.maxRamCount(0).serveStaleOnFetchFailure(true).build(sharingStore: false)
        #expect(try await reopened.getOrFetch(forKey: "k") == "fresh k")
        // Once the network is back, the value is fresh again.
        online.withLock { $0 = true }
        #expect(try await reopened.getOrFetch(forKey: "k") == "fresh k")
        #expect(reopened.entry(forKey: "k")?.isExpired == false)
    }

    @Test func withoutStaleServingAFailedFetchOfAnExpiredValueFails() async throws {
        let folder = TemporaryDirectory()
        let clock = ManualClock()
        let cache = try folder.stringBuilder().clock(clock.read).expiry(.seconds(1))
            .fetcher { _ in throw Offline() }.build()
        cache["k"] = "old"
        clock.advance(by: 1)
        await #expect(throws: CacheError.fetchFailed) { try await cache.getOrFetch(forKey: "k") }
        #expect(cache.entry(forKey: "k") == nil)
    }

    @Test func theSweepRemovesExpiredValuesNobodyReads() async throws {
        let folder = TemporaryDirectory()
        let clock = ManualClock()
        let delegate = RecordingDelegate<String>()
        let cache = try folder.stringBuilder().maxRamCount(5).clock(clock.read).delegate(delegate)
            .serveStaleOnFetchFailure(true).build()
        for index in 0..<10 {
            cache.set("v", forKey: "short\(index)", expiry: .seconds(10))
            cache.set("v", forKey: "long\(index)", expiry: .seconds(1_000))
        }
        await cache.flush()
        clock.advance(by: 10)
        #expect(cache.diskCount == 20)
        let expiredInMemory = cache.memory?.keysInEvictionOrder.filter { $0.hasPrefix("short") }.count ?? 0
        #expect(expiredInMemory == 2)  // of long7, short8, long8, short9, long9
        cache.removeExpired()
        #expect(cache.memoryCount == 3)
        #expect(cache.diskCount == 10)
        #expect(folder.entryFiles().count == 10)
        #expect(Set(cache.allKeys) == Set((0..<10).map { "long\($0)" }))
        #expect(Set(delegate.diskEvictions) == Set((0..<10).map { "short\($0)" }))
        #expect(cache.statistics.evictions(for: .expired) == 10 + expiredInMemory)
        await cache.flush()
        let reopened = try folder.stringBuilder().clock(clock.read).build(sharingStore: false)
        #expect(reopened.diskCount == 10)
    }

    @Test func aBadDefaultExpiryIsRejected() {
        let folder = TemporaryDirectory()
        #expect(throws: CacheError.invalidConfiguration) {
            try folder.stringBuilder().expiry(.seconds(-1)).build()
        }
        #expect(throws: CacheError.invalidConfiguration) {
            try folder.stringBuilder().expiry(.seconds(.nan)).build()
        }
    }

    @Test func aZeroOrNegativePerEntryExpiryStoresAnExpiredValue() async throws {
        let folder = TemporaryDirectory()
        let clock = ManualClock()
        let cache = try folder.stringBuilder().clock(clock.read).build()
        cache.set("v", forKey: "zero", expiry: .seconds(0))
        cache.set("v", forKey: "negative", expiry: .seconds(-5))
        cache.set("v", forKey: "nan", expiry: .seconds(.nan))
        cache.set("v", forKey: "infinite", expiry: .seconds(.infinity))
        #expect(cache.allKeys == ["infinite"])
        #expect(cache.entry(forKey: "zero")?.isExpired == true)
    }
}
