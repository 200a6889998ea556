import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// `maxRamCost` and the share one entry may take, next to the disk limits.
@Suite(.validatesCacheInvariants) struct CacheBudgetTests {
    @Test(arguments: EvictionPolicy.allCases)
    func theMemoryCostLimitHoldsAfterEverySetWithValuesOfMixedSizes(policy: EvictionPolicy) async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.dataBuilder().maxRamCount(1_000).maxRamCost(10_000).maxRamEntryShare(0.5)
            .evictionPolicy(policy).build()
        var generator = SplitMix64(seed: 3)
        var lastKept: String?
        for index in 0..<300 {
            let size = Int(generator.next() % 6_000)
            cache["k\(index)"] = Data(repeating: UInt8(index % 256), count: size)
            #expect(cache.memoryCost <= 10_000)
            #expect(cache.memory?.totalCost == cache.memoryCost)
            if size <= 5_000 { lastKept = "k\(index)" }
        }
        cache.memory?.checkInvariants()
        // The last value small enough is always in memory: a set never evicts the value it stores.
        let kept = try #require(lastKept)
        #expect(cache.memory?.contains(kept) == true)
        let statistics = cache.statistics
        #expect(statistics.evictions(for: .cost) > 0)
        #expect(statistics.evictions(for: .capacity) == 0)
    }

    @Test func aValueLargerThanItsShareOfTheBudgetGoesToDiskOnly() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.dataBuilder().maxRamCost(1_000).build()  // default share: a quarter
        cache["small"] = Data(count: 250)
        cache["large"] = Data(count: 251)
        #expect(cache.memory?.contains("small") == true)
        #expect(cache.memory?.contains("large") == false)
        #expect(cache["large"] == Data(count: 251))  // from disk, and not copied into memory
        #expect(cache.memory?.contains("large") == false)
        #expect(cache.memoryCost == 250)
        // A replacement too large for memory drops the older value from memory.
        cache["small"] = Data(count: 900)
        #expect(cache.memory?.contains("small") == false)
        #expect(cache["small"] == Data(count: 900))
    }

    @Test func diskHitsCopiedIntoMemoryAreCostedToo() async throws {
        let folder = TemporaryDirectory()
        do {
            let writer = try folder.dataBuilder().maxRamCount(0).build()
            for index in 0..<10 { writer["k\(index)"] = Data(count: 100) }
            await writer.flush()
        }
        let cache = try folder.dataBuilder().maxRamCost(300).maxRamEntryShare(1).build(sharingStore: false)
        for index in 0..<10 { #expect(cache["k\(index)"]?.count == 100) }
        #expect(cache.memoryCost == 300)
        #expect(cache.memoryCount == 3)
    }

    @Test func countAndCostLimitsBothHoldAndEachEvictionSaysWhich() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.dataBuilder().maxRamCount(2).maxRamCost(100).maxRamEntryShare(1)
            .evictionPolicy(.lru).maxDiskCount(0).build()
        let events = cache.events
        cache["a"] = Data(count: 10)
        cache["b"] = Data(count: 10)
        cache["c"] = Data(count: 10)  // count limit: "a" goes
        cache["d"] = Data(count: 95)  // count limit: "b" goes; cost limit: "c" goes
        cache.removeValue(forKey: "end")
        let evictions = await events.collect { $0 == .removed(key: "end") }.compactMap { event in
            if event.kind == .evicted, event.level == .memory, let key = event.key, let reason = event.reason {
                (key, reason)
            } else {
                nil
            }
        }
        #expect(evictions.map(\.0) == ["a", "b", "c"])
        #expect(evictions.map(\.1) == [.capacity, .capacity, .cost])
        #expect(cache.statistics.evictionsByReason == [.capacity: 2, .cost: 1])
    }

    @Test func aValueThatCannotBeSerializedIsNotCachedUnderACostLimit() async throws {
        let folder = TemporaryDirectory()
        let delegate = RecordingDelegate<String>()
        let cache = try folder.stringBuilder().serializer(PoisonSerializer(refusing: "bad")).maxRamCost(1_000)
            .delegate(delegate).build()
        cache["k"] = "good"
        await cache.flush()
        cache["k"] = "bad"
        #expect(cache["k"] == nil)  // neither the bad value nor the older one
        await cache.flush()
        #expect(cache.diskCount == 0)
        #expect(delegate.events == [.storeFailure("k")])
        #expect(delegate.lastStoreError.map { $0 as? CacheError }??.code == .serializationFailed)
    }

    @Test func badCostOptionsAreRejected() {
        let folder = TemporaryDirectory()
        #expect(throws: CacheError.invalidConfiguration) { try folder.stringBuilder().maxRamCost(-1).build() }
        #expect(throws: CacheError.invalidConfiguration) { try folder.stringBuilder().maxRamEntryShare(0).build() }
        #expect(throws: CacheError.invalidConfiguration) { try folder.stringBuilder().maxRamEntryShare(1.5).build() }
    }

    @Test func diskLimitsHoldWheneverFlushReturnsAndEvictionsSayWhich() async throws {
        let folder = TemporaryDirectory()
        // LFU: every key is written once, so each write evicts the oldest and the byte limit is met
        // by new values too. (W-TinyLFU would keep its first entries, and the byte limit might never
        // be the one exceeded.)
        let cache = try folder.dataBuilder().maxRamCount(0).maxDiskCount(8).maxDiskBytes(8_000)
            .evictionPolicy(.lfu).build()
        var generator = SplitMix64(seed: 5)
        for index in 0..<300 {
            cache["k\(index)"] = Data(count: Int(generator.next() % 2_000))
            if index % 10 == 9 {
                await cache.flush()
                #expect(cache.diskCount <= 8)
                #expect(cache.diskBytes <= 8_000)
                #expect(folder.entryFiles().count == cache.diskCount)
            }
        }
        let reasons = cache.statistics.evictionsByReason
        #expect(reasons[.capacity, default: 0] > 0)
        #expect(reasons[.cost, default: 0] > 0)
        #expect(reasons[.capacity, default: 0] + reasons[.cost, default: 0] == cache.statistics.diskEvictions)
    }
}
