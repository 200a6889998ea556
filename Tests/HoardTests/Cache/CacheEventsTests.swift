import Foundation
import Testing

@testable import Hoard

/// The event stream: every subscriber gets every event, and none can block the cache.
@Suite(.validatesCacheInvariants) struct CacheEventsTests {
    @Test func twoSubscribersEachReceiveEveryEventInOrder() async throws {
        let folder = TemporaryDirectory()
        let clock = ManualClock()
        let cache = try folder.stringBuilder().maxRamCount(1).evictionPolicy(.lru).clock(clock.read).build()
        let first = cache.events
        let second = cache.events
        cache["a"] = "1"
        _ = cache["a"]
        cache.set("2", forKey: "b", expiry: .seconds(5))  // evicts "a" from memory
        _ = cache["nothing"]
        await cache.flush()
        _ = cache["a"]  // from disk, copied into memory: evicts "b"
        clock.advance(by: 5)
        _ = cache["b"]  // expired on disk
        cache.removeValue(forKey: "a")
        cache.clearMemory()
        cache.clearDisk()
        let expected: [CacheEvent<String>] = [
            .set(key: "a", value: "1"),
            .hit(key: "a", level: .memory),
            .set(key: "b", value: "2"),
            .evicted(key: "a", level: .memory, reason: .capacity),
            .miss(key: "nothing"),
            .evicted(key: "b", level: .memory, reason: .capacity),
            .hit(key: "a", level: .disk),
            .evicted(key: "b", level: .disk, reason: .expired),
            .miss(key: "b"),
            .removed(key: "a"),
            .cleared(.memory),
            .cleared(.disk),
        ]
        let isLast: @Sendable (CacheEvent<String>) -> Bool = { $0 == .cleared(.disk) }
        async let fromFirst = first.collect(through: isLast)
        async let fromSecond = second.collect(through: isLast)
        let (seenFirst, seenSecond) = await (fromFirst, fromSecond)
        #expect(seenFirst == expected)
        #expect(seenSecond == expected)
    }

    @Test func aSlowSubscriberNeverBlocksTheCacheAndKeepsTheNewestEvents() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().maxDiskCount(0).build()
        let slow = cache.events(bufferingNewest: 3)
        for index in 0..<1_000 { cache["k\(index)"] = "v" }  // nobody reads: this must not block
        cache.removeValue(forKey: "end")
        let seen = await slow.collect(through: { $0 == .removed(key: "end") })
        #expect(seen.count == 3)
        #expect(seen.last == .removed(key: "end"))
    }

    @Test func aSubscriptionAddedLaterSeesOnlyLaterEventsAndEndsWithTheCache() async throws {
        let folder = TemporaryDirectory()
        var cache: Cache<String>? = try folder.stringBuilder().build()
        cache?["early"] = "v"
        let late = try #require(cache?.events)
        cache?["late"] = "v"
        cache = nil  // the stream ends when the cache goes
        let seen = await late.collect(through: { _ in false })
        #expect(seen == [.set(key: "late", value: "v")])
    }

    @Test func aFinishedSubscriptionStopsCostingAnything() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().build()
        do {
            let stream = cache.events
            cache["a"] = "1"
            _ = await stream.collect(through: { _ in true })
        }
        #expect(!cache.reporter.hub.isObserved)
        #expect(cache.memory?.withShard(0) { $0.isObserved } == false)
    }

    @Test func memoryPressureEvictsEveryValueFromMemoryWithItsReason() async throws {
        let folder = TemporaryDirectory()
        let delegate = RecordingDelegate<String>()
        let cache = try folder.stringBuilder().delegate(delegate).build()
        let events = cache.events
        for key in ["a", "b", "c"] { cache[key] = key }
        cache.onMemoryWarning()
        cache.removeValue(forKey: "end")
        let evicted = await events.collect(through: { $0 == .removed(key: "end") }).compactMap { event in
            event.kind == .evicted && event.level == .memory && event.reason == .memoryPressure ? event.key : nil
        }
        #expect(Set(evicted) == ["a", "b", "c"])
        #expect(Set(delegate.memoryEvictions) == ["a", "b", "c"])
        #expect(cache.memoryCount == 0)
        #expect(cache.statistics.evictions(for: .memoryPressure) == 3)
        #expect(cache["a"] == "a")  // still on disk
    }

    @Test func fetchesAreSetEventsAndTheDelegateStillHearsEvictions() async throws {
        let folder = TemporaryDirectory()
        let delegate = RecordingDelegate<String>()
        let cache = try folder.stringBuilder().maxRamCount(1).delegate(delegate).fetcher { "got \($0)" }.build()
        let events = cache.events
        _ = try await cache.getOrFetch(forKey: "x")
        _ = try await cache.getOrFetch(forKey: "y")
        cache.removeValue(forKey: "end")
        let seen = await events.collect(through: { $0 == .removed(key: "end") })
        #expect(seen.contains(.set(key: "x", value: "got x")))
        #expect(seen.contains(.set(key: "y", value: "got y")))
        #expect(seen.contains(.evicted(key: "x", level: .memory, reason: .capacity)))
        #expect(delegate.memoryEvictions == ["x"])
    }
}
