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
