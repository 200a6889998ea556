import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// The seam between the byte budget and the container's own files: `maxDiskBytes` bounds every file
/// of the container (entries, index and journal, manifest, lock file) whenever `flush()` returns.
@Suite(.validatesCacheInvariants) struct CacheContainerBytesTests {
    /// The bytes of every regular file in `folder`, its subfolders included.
    static func bytesOnDisk(_ folder: URL) -> Int {
        guard let files = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil) else { return 0 }
        var total = 0
        for case let file as URL in files {
            let values = try? file.resourceValues(forKeys: [.fileSizeKey, .isRegularFileKey])
            if values?.isRegularFile == true { total += values?.fileSize ?? 0 }
        }
        return total
    }

    /// Budgets from 16 KiB to 100 MiB, each filled twice over with values of 1/60 to 1/12 of it.
    @Test(arguments: [16 << 10, 64 << 10, 1 << 20, 100 << 20])
    func everyFileOfTheContainerFitsTheByteLimitWheneverFlushReturns(budget: Int) async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.dataBuilder().maxRamCount(4).maxDiskCount(100_000).maxDiskBytes(budget).build()
        var generator = SplitMix64(seed: UInt64(budget))
        var written = 0
        var index = 0
        while written < 2 * budget {
            let size = budget / 60 + Int(generator.next() % UInt64(budget / 12 - budget / 60))
            cache["\(index)"] = Data(repeating: UInt8(index % 251), count: size)
            written += size
            index += 1
            if index % 50 == 0 {
                await cache.flush()
                #expect(Self.bytesOnDisk(folder.container()) <= budget, "after \(index) sets")
            }
        }
        await cache.flush()
        #expect(Self.bytesOnDisk(folder.container()) <= budget)
        #expect(cache.statistics.diskBytes <= budget)
        // The last value is kept: a write evicts others, never itself.
        #expect(cache.disk?.keysInEvictionOrder.contains("\(index - 1)") == true)
    }

    /// Tiny values, where the index takes as many bytes as the entries themselves.
    @Test func tinyValuesCountTheirIndexRecordsToo() async throws {
        let folder = TemporaryDirectory()
        let budget = 16 << 10
        let cache = try folder.dataBuilder().maxRamCount(0).maxDiskCount(100_000).maxDiskBytes(budget).build()
        for index in 0..<2_000 { cache["\(index)"] = Data([UInt8(index % 256)]) }
        await cache.flush()
        #expect(Self.bytesOnDisk(folder.container()) <= budget)
        #expect(cache.diskCount > 50, "the budget still holds many tiny values")
        #expect(cache["1999"] == Data([UInt8(1999 % 256)]))
    }

    /// A reopened container applies the same budget to what it finds.
    @Test func aReopenedContainerKeepsWithinTheBudget() async throws {
        let folder = TemporaryDirectory()
        do {
            let cache = try folder.dataBuilder().maxRamCount(0).maxDiskBytes(256 << 10).build()
            for index in 0..<100 { cache["\(index)"] = Data(count: 2_000) }
            await cache.flush()
        }
        let smaller = try folder.dataBuilder().maxRamCount(0).maxDiskBytes(32 << 10).build(sharingStore: false)
        await smaller.flush()
        #expect(smaller.diskCount > 0)
        #expect(Self.bytesOnDisk(folder.container()) <= 32 << 10)
    }
}

/// Sections that journal without evicting (removals, refused values) after a snapshot grew.
@Suite(.validatesCacheInvariants) struct CacheContainerBytesJournalOnlyTests {
    @Test func removalsAndRefusedValuesAfterAFullBudgetStillFitWhenFlushReturns() async throws {
        let folder = TemporaryDirectory()
        let budget = 64 << 10
        let cache = try folder.dataBuilder().maxRamCount(0).maxDiskCount(10_000).maxDiskBytes(budget).build()
        for index in 0..<200 { cache["\(index)"] = Data(count: 1_000 + index % 7) }
        await cache.flush()
        // Each removal of a key that is not on disk journals a record and evicts nothing.
        for index in 0..<400 { cache.removeValue(forKey: "absent \(index)") }
        await cache.flush()
        #expect(CacheContainerBytesTests.bytesOnDisk(folder.container()) <= budget)
        // A value too large to keep journals a removal of its key too.
        for index in 0..<50 { cache["huge \(index)"] = Data(count: budget) }
        await cache.flush()
        #expect(CacheContainerBytesTests.bytesOnDisk(folder.container()) <= budget)
        #expect(cache["199"]?.count == 1_000 + 199 % 7)
    }
}
