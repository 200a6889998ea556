import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// `contains`, `allKeys`, `maxDiskBytes` and `version`.
@Suite(.validatesCacheInvariants) struct CacheVisibilityTests {
    @Test func containsSeesBothLevelsAndPendingWritesWithoutCountingAnAccess() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().maxRamCount(1).evictionPolicy(.lru).build()
        #expect(!cache.contains("a"))
        cache["a"] = "1"
        #expect(cache.contains("a"))
        cache["b"] = "2"  // evicts "a" from memory; it is pending or on disk
        #expect(cache.contains("a"))
        cache.removeValue(forKey: "a")
        #expect(!cache.contains("a"))
        await cache.flush()
        #expect(cache.contains("b"))
        #expect(!cache.contains("a"))
    }

    @Test func allKeysListsEveryKeyOnceAsStoredEvenAfterARestart() async throws {
        let folder = TemporaryDirectory()
        let keys = ["plain", "caf\u{E9}", "../../etc/passwd", "", "🦄"]
        do {
            let cache = try folder.stringBuilder().maxRamCount(2).build()
            for key in keys { cache[key] = "v" }
            cache["gone"] = "v"
            cache.removeValue(forKey: "gone")
            #expect(Set(cache.allKeys) == Set(keys))
            #expect(cache.allKeys.count == keys.count)
            await cache.flush()
        }
        let reopened = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        #expect(Set(reopened.allKeys) == Set(keys))
        // The index was deleted: the keys come back from the entries themselves.
        try FileManager.default.removeItem(at: folder.container().appendingPathComponent(".hoard-index"))
        let rebuilt = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        #expect(Set(rebuilt.allKeys) == Set(keys))
    }

    @Test func maxDiskBytesHoldsWhenFlushReturnsWithValuesOfMixedSizes() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.dataBuilder().maxRamCount(0).maxDiskCount(1_000).maxDiskBytes(4_096).build()
        var generator = SplitMix64(seed: 9)
        for index in 0..<200 {
            cache["k\(index)"] = Data(count: Int(generator.next() % 900))
            if index % 20 == 19 {
                await cache.flush()
                let onDisk = try folder.entryFiles().reduce(0) { total, name in
                    let path = folder.container().appendingPathComponent(name).path
                    return total + ((try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0)
                }
                #expect(onDisk <= 4_096)
                #expect(cache.diskBytes == onDisk)
            }
        }
        // The most recent value is always kept.
        #expect(cache["k199"] != nil)
    }

    @Test func entriesWrittenUnderAnotherVersionAreMissesAndAreRemoved() async throws {
        let folder = TemporaryDirectory()
        do {
            let old = try folder.stringBuilder().version(1).build()
            old["k"] = "model 1"
            await old.flush()
        }
        let new = try folder.stringBuilder().version(2).build(sharingStore: false)
        #expect(new["k"] == nil)
        #expect(new.diskCount == 0)
        #expect(folder.entryFiles().isEmpty)
        new["k"] = "model 2"
        await new.flush()
        let again = try folder.stringBuilder().version(2).maxRamCount(0).build(sharingStore: false)
        #expect(again["k"] == "model 2")
    }

    @Test func negativeByteLimitsAndVersionsAreRejected() {
        let folder = TemporaryDirectory()
        #expect(throws: CacheError.invalidConfiguration) { try folder.stringBuilder().maxDiskBytes(-1).build() }
        #expect(throws: CacheError.invalidConfiguration) { try folder.stringBuilder().version(-1).build() }
    }
}

private struct Unavailable: Error {}

extension CacheVisibilityTests {
    @Test func statisticsCountHitsMissesFetchesAndEvictions() async throws {
        let folder = TemporaryDirectory()
        let attempts = Counter()
        let cache = try folder.stringBuilder().maxRamCount(1).maxDiskCount(2).evictionPolicy(.lru).maxRetryCount(1)
            .fetcher { key in
                attempts.increment()
                if key == "down" { throw Unavailable() }
                return "fetched \(key)"
            }.build()
        #expect(cache.statistics == CacheStatistics())
        cache["a"] = "1"
        _ = cache["a"]  // memory hit
        cache["b"] = "2"  // evicts "a" from memory
        await cache.flush()
        _ = cache["a"]  // disk hit, copied back into memory (evicting "b")
        _ = cache["nothing"]  // miss
        _ = try await cache.getOrFetch(forKey: "c")  // miss, then one fetch; disk evicts the oldest entry
        _ = try? await cache.getOrFetch(forKey: "down")  // miss, two attempts, one failure
        await cache.flush()
        let statistics = cache.statistics
        #expect(statistics.memoryHits == 1)
        #expect(statistics.diskHits == 1)
        #expect(statistics.misses == 3)
        #expect(statistics.fetches == 3)
        #expect(attempts.value == 3)
        #expect(statistics.fetchFailures == 1)
        #expect(statistics.memoryEvictions == 3)  // "a" by "b", "b" by "a", "a" by "c"
        #expect(statistics.diskEvictions == 1)
        #expect(statistics.evictions == 4)
        #expect(statistics.diskCount == 2)
        #expect(statistics.diskBytes == cache.diskBytes)
        #expect(statistics.diskBytes > 0)
    }
}

extension CacheVisibilityTests {
    @Test func memoryOnlyEvictionsAreCountedWithOrWithoutAnyoneListening() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().maxRamCount(3).maxDiskCount(0).evictionPolicy(.lru).build()
        for index in 0..<10 { cache["k\(index)"] = "v" }
        #expect(cache.statistics.memoryEvictions == 7)
        #expect(cache.statistics.evictionsByReason == [.capacity: 7])
        // A delegate set later hears the next evictions, and they are counted once.
        let delegate = RecordingDelegate<String>()
        cache.delegate = delegate
        cache["k10"] = "v"
        #expect(delegate.memoryEvictions == ["k7"])
        cache.delegate = nil
        let events = cache.events
        cache["k11"] = "v"
        cache.removeValue(forKey: "end")
        let seen = await events.collect(through: { $0 == .removed(key: "end") })
        #expect(seen.contains(.evicted(key: "k8", level: .memory, reason: .capacity)))
        #expect(cache.statistics.memoryEvictions == 9)
        #expect(cache.statistics.evictionsByReason == [.capacity: 9])
    }

    @Test func aFullLargeMemoryLevelHoldsExactlyMaxRamCountValues() throws {
        // A level of 16 384 entries or more is sharded; with a limit per shard, 100 000 sets into
        // maxRamCount(100_000) kept 99 633 values. Two shards and the default policy here:
        // MemoryStoreTests checks every policy and sizes up to a million.
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().maxRamCount(20_000).maxDiskCount(0).build()
        for index in 0..<20_000 { cache["k\(index)"] = "v" }
        #expect(cache.memoryCount == 20_000)
        #expect(cache.statistics.memoryEvictions == 0)
        cache["one more"] = "v"
        #expect(cache.memoryCount == 20_000)
        #expect(cache.statistics.memoryEvictions == 1)
        cache.validateInvariants()
    }
}
