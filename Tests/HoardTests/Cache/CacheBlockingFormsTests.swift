import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// The blocking forms: `getOrFetchAndWait(forKey:)` and `flushAndWait()`, from plain threads.
@Suite(.validatesCacheInvariants) struct CacheBlockingFormsTests {
    @Test func flushAndWaitReturnsOnceEverySetIsOnDisk() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().maxRamCount(1).build()
        let count = await onPlainThread { () -> Int in
            for index in 0..<50 { cache["k\(index)"] = "v\(index)" }
            cache.flushAndWait()
            return cache.diskCount
        }
        #expect(count == 50)
        #expect(folder.entryFiles().count == 50)
    }

    @Test func manyThreadsFlushAndWaitAtOnceWithoutStarvingEachOther() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().build()
        let finished = try await withThrowingTaskGroup(of: Int.self) { group in
            for thread in 0..<8 {
                group.addTask {
                    await onPlainThread { () -> Int in
                        for index in 0..<20 { cache["t\(thread)-\(index)"] = "v" }
                        cache.flushAndWait()
                        return (0..<20).filter { folder.entryFiles().contains(DiskKey("t\(thread)-\($0)").fileName) }
                            .count
                    }
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(finished == 8 * 20)
    }

    @Test func aMemoryOnlyCacheFlushesAtOnce() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().maxDiskCount(0).build()
        cache["k"] = "v"
        await onPlainThread { cache.flushAndWait() }
        #expect(cache["k"] == "v")
    }

    @Test func getOrFetchAndWaitFetchesOnceAndThenServesMemory() async throws {
        let folder = TemporaryDirectory()
        let calls = Counter()
        let cache = try folder.stringBuilder().fetcher { key in
            _ = calls.increment()
            return "got \(key)"
        }.build()
        let values = await onPlainThread {
            [try? cache.getOrFetchAndWait(forKey: "k"), try? cache.getOrFetchAndWait(forKey: "k")]
        }
        #expect(values == ["got k", "got k"])
        #expect(calls.value == 1)
    }
}
