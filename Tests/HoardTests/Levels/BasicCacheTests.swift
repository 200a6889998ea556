import Testing

@testable import Hoard

/// Tests for `BasicCache`, `Fetcher`'s defaults and `normalize()`.
@Suite struct BasicCacheTests {
    /// A fetcher that only writes `get`.
    struct Doubler: Fetcher {
        func get(_ key: Int) async throws -> Int { key * 2 }
    }

    @Test func closuresBackEveryMethod() async throws {
        let inner = RecordingLevel<String, Int>(["a": 1])
        let level = BasicCache<String, Int>(
            get: { try await inner.get($0) },
            set: { try await inner.set($0, forKey: $1) },
            removeValue: { try await inner.removeValue(forKey: $0) },
            clear: { await inner.clear() },
            onMemoryWarning: { inner.onMemoryWarning() }
        )
        #expect(try await level.get("a") == 1)
        try await level.set(2, forKey: "b")
        try await level.removeValue(forKey: "a")
        await level.clear()
        level.onMemoryWarning()
        #expect(inner.gets == 1)
        #expect(inner.sets == 1)
        #expect(inner.removes == 1)
        #expect(inner.clears == 1)
        #expect(inner.memoryWarnings == 1)
    }

    @Test func defaultClosuresDoNothing() async throws {
        let level = BasicCache<String, Int>(get: { _ in 7 })
        try await level.set(1, forKey: "a")
        try await level.removeValue(forKey: "a")
        await level.clear()
        level.onMemoryWarning()
        #expect(try await level.get("a") == 7)
    }

    @Test func fetcherDefaultsAreNoOps() async throws {
        let fetcher = Doubler()
        try await fetcher.set(1, forKey: 1)
        try await fetcher.removeValue(forKey: 1)
        await fetcher.clear()
        fetcher.onMemoryWarning()
        #expect(try await fetcher.get(21) == 42)
    }

    @Test func normalizeKeepsBehaviour() async throws {
        let memory = MemoryCacheLevel<String, Int>(capacity: 4)
        let erased = memory.normalize()
        try await erased.set(3, forKey: "c")
        #expect(try await memory.get("c") == 3)
        let again = erased.normalize()
        #expect(try await again.get("c") == 3)
        // Through a generic context too: a BasicCache is not wrapped again.
        func erase<Level: CacheLevel>(_ level: Level) -> BasicCache<Level.Key, Level.Value> { level.normalize() }
        #expect(try await erase(erased).get("c") == 3)
    }
}
