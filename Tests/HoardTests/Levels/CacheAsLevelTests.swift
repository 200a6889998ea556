import Foundation
import Testing

@testable import Hoard

/// Tests for `Cache` used as a `CacheLevel`.
@Suite struct CacheAsLevelTests {
    /// Uses any level generically, as the adapters do.
    func roundTrip<Level: CacheLevel>(
        _ level: Level,
        _ value: Level.Value,
        _ key: Level.Key
    ) async throws -> Level.Value {
        try await level.set(value, forKey: key)
        return try await level.get(key)
    }

    @Test func getIsGetOrFetch() async throws {
        let directory = TemporaryDirectory()
        let cache = try directory.stringBuilder().fetcher { key in "fetched \(key)" }.build()
        #expect(try await cache.get("a") == "fetched a")
        #expect(cache.value(forKey: "a") == "fetched a")
    }

    @Test func setRemoveClearAndMemoryWarning() async throws {
        let directory = TemporaryDirectory()
        let cache = try directory.stringBuilder().build()
        let level: any CacheLevel<String, String> = cache
        #expect(try await roundTrip(cache, "one", "1") == "one")
        try await level.removeValue(forKey: "1")
        await #expect(throws: CacheError.notFound) { try await level.get("1") }
        #expect(try await roundTrip(cache, "two", "2") == "two")
        level.onMemoryWarning()
        #expect(cache.memoryCount == 0)
        #expect(try await level.get("2") == "two")
        await level.clear()
        await cache.flush()
        #expect(cache.diskCount == 0)
        await #expect(throws: CacheError.notFound) { try await cache.get("2") }
    }

    @Test func composesWithOtherLevels() async throws {
        let directory = TemporaryDirectory()
        let cache = try directory.stringBuilder().build()
        let memory = MemoryCacheLevel<String, String>(capacity: 4)
        let levels = memory.compose(cache)
        cache["k"] = "v"
        #expect(try await levels.get("k") == "v")
        #expect(try await memory.get("k") == "v")
    }
}
