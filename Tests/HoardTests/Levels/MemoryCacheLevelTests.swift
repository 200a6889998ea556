import HoardTestSupport
import Testing

@testable import Hoard

/// Tests for `MemoryCacheLevel`: misses, writes, eviction and memory warnings.
@Suite struct MemoryCacheLevelTests {
    @Test func missThrowsNotFound() async {
        let level = MemoryCacheLevel<String, Int>(capacity: 4)
        await #expect(throws: CacheError.notFound) { try await level.get("absent") }
    }

    @Test func setGetRemoveClear() async throws {
        let level = MemoryCacheLevel<Int, String>(capacity: 4)
        try await level.set("one", forKey: 1)
        try await level.set("two", forKey: 2)
        #expect(try await level.get(1) == "one")
        #expect(level.count == 2)
        try await level.removeValue(forKey: 1)
        await #expect(throws: CacheError.notFound) { try await level.get(1) }
        await level.clear()
        #expect(level.count == 0)
        await #expect(throws: CacheError.notFound) { try await level.get(2) }
    }

    @Test(arguments: EvictionPolicy.allCases)
    func keepsAtMostItsCapacity(policy: EvictionPolicy) async throws {
        let level = MemoryCacheLevel<Int, Int>(capacity: 3, policy: policy)
        for key in 0..<10 { try await level.set(key, forKey: key) }
        #expect(level.count == 3)
        #expect(level.capacity == 3)
        #expect(try await level.get(9) == 9)
    }

    @Test func memoryWarningEmptiesTheLevel() async throws {
        let level = MemoryCacheLevel<String, Int>(capacity: 4)
        try await level.set(1, forKey: "a")
        level.onMemoryWarning()
        #expect(level.count == 0)
    }
}

extension MemoryCacheLevelTests {
    @Test(arguments: EvictionPolicy.allCases)
    func theCostLimitHoldsAfterEverySetAndFollowsThePolicy(policy: EvictionPolicy) async throws {
        let level = MemoryCacheLevel<String, [UInt8]>(capacity: 100, costLimit: 10, policy: policy) { $0.count }
        try await level.set([UInt8](repeating: 0, count: 4), forKey: "a")
        try await level.set([UInt8](repeating: 0, count: 4), forKey: "b")
        _ = try await level.get("a")  // a: 2 accesses, used last
        #expect(level.totalCost == 8)
        // 8 + 3 > 10: one value must go. LRU and LFU both pick "b" (older, and used less).
        try await level.set([UInt8](repeating: 0, count: 3), forKey: "c")
        #expect(level.totalCost == 7)
        await #expect(throws: CacheError.notFound) { try await level.get("b") }
        #expect(try await level.get("a").count == 4)
        // Mixed sizes: the limit holds after every set.
        var generator = SplitMix64(seed: 5)
        for index in 0..<500 {
            let size = Int(generator.next() % 7)
            try await level.set([UInt8](repeating: 1, count: size), forKey: "k\(index % 30)")
            #expect(level.totalCost <= 10)
        }
        level.store.checkInvariants()
    }

    @Test func aValueCostingMoreThanTheLimitIsNotKeptAndEvictsNothing() async throws {
        let level = MemoryCacheLevel<String, String>(capacity: 10, costLimit: 6) { $0.utf8.count }
        try await level.set("abc", forKey: "small")
        try await level.set("old", forKey: "big")
        try await level.set("far too long", forKey: "big")
        await #expect(throws: CacheError.notFound) { try await level.get("big") }  // the old value is stale
        #expect(try await level.get("small") == "abc")
        #expect(level.totalCost == 3)
    }

    @Test func withoutACostClosureEveryValueCostsOne() async throws {
        let level = MemoryCacheLevel<Int, Int>(capacity: 10, costLimit: 3)
        for key in 0..<6 { try await level.set(key, forKey: key) }
        #expect(level.count == 3)
        #expect(level.totalCost == 3)
    }

    @Test func replacingAValueUpdatesItsCost() async throws {
        let level = MemoryCacheLevel<String, String>(capacity: 10, costLimit: 10) { $0.utf8.count }
        try await level.set("aaaa", forKey: "k")
        try await level.set("aa", forKey: "k")
        #expect(level.totalCost == 2)
        try await level.removeValue(forKey: "k")
        #expect(level.totalCost == 0)
    }
}
