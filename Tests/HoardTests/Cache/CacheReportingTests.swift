import Foundation
import Testing

@testable import Hoard

/// What a cache reports for one call: each read counted once, each event sent once.
@Suite(.validatesCacheInvariants) struct CacheReportingTests {
    @Test func aDiskOnlyMissThatFetchesCountsOneMissAndSendsOneMissEvent() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().maxRamCount(0).fetcher { "fetched \($0)" }.build()
        let events = cache.events
        #expect(try await cache.getOrFetch(forKey: "k") == "fetched k")
        cache.removeValue(forKey: "end")
        let seen = await events.collect(through: { $0 == .removed(key: "end") })
        #expect(seen == [.miss(key: "k"), .set(key: "k", value: "fetched k"), .removed(key: "end")])
        #expect(cache.statistics.misses == 1)
        #expect(cache.statistics.diskHits == 0)
        #expect(cache.statistics.fetches == 1)
    }

    @Test func aMemoryOnlyMissThatFetchesCountsOneMissAndSendsOneMissEvent() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().maxDiskCount(0).fetcher { "fetched \($0)" }.build()
        let events = cache.events
        #expect(try await cache.getOrFetch(forKey: "k") == "fetched k")
        cache.removeValue(forKey: "end")
        let seen = await events.collect(through: { $0 == .removed(key: "end") })
        #expect(seen == [.miss(key: "k"), .set(key: "k", value: "fetched k"), .removed(key: "end")])
        #expect(cache.statistics.misses == 1)
        #expect(cache.statistics.memoryHits == 0)
    }

    @Test func anExpiredValueInMemoryIsAMissNotAHit() async throws {
        let folder = TemporaryDirectory()
        let clock = ManualClock()
        let cache = try folder.stringBuilder().maxDiskCount(0).clock(clock.read).build()
        cache.set("v", forKey: "k", expiry: .seconds(5))
        #expect(cache["k"] == "v")
        clock.advance(by: 5)
        #expect(cache["k"] == nil)
        #expect(cache.statistics.memoryHits == 1)
        #expect(cache.statistics.misses == 1)
        #expect(cache.statistics.evictions(for: .expired) == 1)
    }

    @Test func subscribingAndUnsubscribingLeavesTheMemoryStoreToldTheTruth() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().build()
        for _ in 0..<50 {
            let streams = (0..<4).map { _ in cache.events }
            #expect(cache.memory?.withShard(0) { $0.isObserved } == true)
            for stream in streams {
                cache["tick"] = "v"
                _ = await stream.collect(through: { _ in true })
            }
        }
        #expect(await waitUntil { cache.memory?.withShard(0) { $0.isObserved } == false })
        #expect(!cache.reporter.hub.isObserved)
    }
}
