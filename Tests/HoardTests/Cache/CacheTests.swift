import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

@Suite(.validatesCacheInvariants) struct CacheTests {
    @Test func subscriptSetsReadsAndRemoves() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().build()
        #expect(cache["a"] == nil)
        cache["a"] = "1"
        #expect(cache["a"] == "1")
        #expect(cache.value(forKey: "a") == "1")
        cache["a"] = nil
        #expect(cache["a"] == nil)
        await cache.flush()
        #expect(cache.diskCount == 0)
        #expect(cache.memoryCount == 0)
    }

    @Test func aSetReachesDiskAfterFlushAndAMemoryMissReadsIt() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().build()
        cache.set("value", forKey: "k")
        await cache.flush()
        #expect(cache.diskCount == 1)
        #expect(folder.entryFiles().count == 1)
        cache.clearMemory()
        #expect(cache.memoryCount == 0)
        #expect(cache["k"] == "value")
        // A disk hit is kept in memory.
        #expect(cache.memoryCount == 1)
    }

    @Test func aValueEvictedFromMemoryIsReadableBeforeItsWriteLands() async throws {
        let folder = TemporaryDirectory()
        let blocking = BlockingSerializer()
        let gate = blocking.gate
        let cache = try CacheBuilder<String>(serializer: blocking).containerName("c").directory(folder.url)
            .maxRamCount(1).build()
        cache["first"] = "1"
        // The writer is now stuck serializing "first"; the next sets queue behind it.
        #expect(await waitUntil { blocking.started.value >= 1 })
        cache["second"] = "2"
        cache["third"] = "3"
        #expect(cache.memoryCount == 1)
        #expect(cache["first"] == "1")
        #expect(cache["second"] == "2")
        gate.open()
        await cache.flush()
        #expect(cache.diskCount == 3)
        cache.clearMemory()
        #expect(cache["first"] == "1")
        #expect(cache["second"] == "2")
        #expect(cache["third"] == "3")
    }

    @Test func theLastOfManyWritesToOneKeyWins() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().maxRamCount(0).build()
        for index in 0..<500 { cache["k"] = "\(index)" }
        #expect(cache["k"] == "499")
        await cache.flush()
        #expect(cache["k"] == "499")
        let reopened = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        #expect(reopened["k"] == "499")
    }

    @Test func removeWinsOverAnEarlierSetNotYetWritten() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().build()
        cache["k"] = "v"
        cache.removeValue(forKey: "k")
        #expect(cache["k"] == nil)
        await cache.flush()
        #expect(cache["k"] == nil)
        #expect(cache.diskCount == 0)
        #expect(folder.entryFiles().isEmpty)
    }

    @Test func operationsQueuedWhileTheirKeyIsBeingWrittenAreApplied() async throws {
        let folder = TemporaryDirectory()
        let blocking = BlockingSerializer()
        let gate = blocking.gate
        let builder = CacheBuilder<String>(serializer: blocking).containerName("c").directory(folder.url)
        let cache = try builder.build()
        cache["removed"] = "1"
        #expect(await waitUntil { blocking.started.value >= 1 })
        // The writer is inside the write of "removed": queue a removal of it, and two writes of another key.
        cache.removeValue(forKey: "removed")
        cache["kept"] = "old"
        cache["kept"] = "new"
        gate.open()
        await cache.flush()
        #expect(cache.diskCount == 1)
        #expect(folder.entryFiles(in: "c").count == 1)
        let reopened = try builder.maxRamCount(0).build(sharingStore: false)
        #expect(reopened["removed"] == nil)
        #expect(reopened["kept"] == "new")
    }

    @Test(arguments: ["set", "remove"])
    func aDiskReadRacingASetOrRemoveNeverLeavesAStaleValueInMemory(change: String) async throws {
        let folder = TemporaryDirectory()
        let serializer = GatedDeserializer()
        let cache = try CacheBuilder<String>(serializer: serializer).containerName("c").directory(folder.url).build()
        cache["k"] = "old"
        await cache.flush()
        cache.clearMemory()
        serializer.armed.withLock { $0 = true }
        async let read = onPlainThread { cache["k"] }
        // The reader has the old bytes from disk and is decoding them; change the key meanwhile.
        #expect(await waitUntil { serializer.waiting.value == 1 })
        if change == "set" { cache["k"] = "new" } else { cache.removeValue(forKey: "k") }
        serializer.gate.open()
        #expect(await read == "old")  // it read before the change: either answer is fine
        #expect(cache["k"] == (change == "set" ? "new" : nil))
        await cache.flush()
        cache.clearMemory()
        #expect(cache["k"] == (change == "set" ? "new" : nil))
    }

    @Test func removeAllClearsBothLevelsAndTellsTheDelegateFirst() async throws {
        let folder = TemporaryDirectory()
        let delegate = RecordingDelegate<String>()
        let cache = try folder.stringBuilder().delegate(delegate).build()
        let counts = Protected<[(memory: Int, disk: Int)]>([])
        delegate.onEvent = { cache, event in
            if event == .willClearMemory || event == .willClearDisk {
                counts.withLock { $0.append((cache.memoryCount, cache.diskCount)) }
            }
        }
        for index in 0..<10 { cache["\(index)"] = "\(index)" }
        await cache.flush()
        cache["pending"] = "maybe not written yet"
        cache.removeAll()
        #expect(delegate.events == [.willClearMemory, .willClearDisk])
        // Each callback comes before its level is cleared, and memory is cleared first.
        let seen = counts.withLock { $0 }
        #expect(seen.map(\.memory) == [11, 0])
        #expect(seen.allSatisfy { $0.disk >= 10 })
        #expect(cache.memoryCount == 0)
        #expect(cache.diskCount == 0)
        #expect(cache["pending"] == nil)
        #expect(cache["3"] == nil)
        await cache.flush()
        #expect(folder.entryFiles().isEmpty)
    }

    @Test func clearMemoryKeepsDiskAndClearDiskKeepsMemory() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().build()
        cache["a"] = "1"
        await cache.flush()
        cache.clearMemory()
        #expect(cache.memoryCount == 0)
        #expect(cache.diskCount == 1)
        #expect(cache["a"] == "1")
        cache.clearDisk()
        #expect(cache.diskCount == 0)
        #expect(cache.memoryCount == 1)
        #expect(cache["a"] == "1")
    }

    @Test(arguments: EvictionPolicy.allCases)
    func memoryEvictsTheVictimThePolicyNames(policy: EvictionPolicy) throws {
        let folder = TemporaryDirectory()
        let delegate = RecordingDelegate<String>()
        let cache = try folder.stringBuilder().maxRamCount(3).maxDiskCount(0).evictionPolicy(policy).delegate(delegate)
            .build()
        cache["a"] = "a"
        cache["b"] = "b"
        cache["c"] = "c"
        _ = cache["a"]
        _ = cache["a"]
        _ = cache["c"]
        _ = cache["b"]
        // LFU: a 3, c 2, b 2 (b used last) -> c. LRU: order a, c, b -> a. W-TinyLFU: the window's
        // candidate c (2 uses) does not beat main's victim a (3 uses) -> c.
        cache["d"] = "d"
        #expect(delegate.memoryEvictions == [policy == .lru ? "a" : "c"])
        #expect(cache.memoryCount == 3)
    }

    @Test(arguments: EvictionPolicy.allCases)
    func diskKeepsItsCountLimitAndReportsRealEvictions(policy: EvictionPolicy) async throws {
        let folder = TemporaryDirectory()
        let delegate = RecordingDelegate<String>()
        let cache = try folder.stringBuilder().maxRamCount(0).maxDiskCount(3).evictionPolicy(policy).delegate(delegate)
            .build()
        for key in ["a", "b", "c"] { cache[key] = key }
        await cache.flush()
        _ = cache["a"]  // a disk hit refreshes the disk order
        _ = cache["a"]
        _ = cache["b"]
        cache["d"] = "d"
        await cache.flush()
        #expect(cache.diskCount == 3)
        #expect(folder.entryFiles().count == 3)
        // LFU: a 3, b 2, c 1 -> c. LRU: order c, a, b -> c.
        #expect(delegate.diskEvictions == ["c"])
        #expect(cache["c"] == nil)
        for key in 0..<20 { cache["x\(key)"] = "x" }
        await cache.flush()
        #expect(cache.diskCount == 3)
        #expect(folder.entryFiles().count == 3)
        #expect(delegate.diskEvictions.count == 21)
    }

    @Test(arguments: EvictionPolicy.allCases)
    func diskEvictionOrderSurvivesARestart(policy: EvictionPolicy) async throws {
        let folder = TemporaryDirectory()
        let builder = folder.stringBuilder().maxRamCount(0).maxDiskCount(4).evictionPolicy(policy)
        // LFU by count; LRU by last read; W-TinyLFU: the window's newest entry d, then protected's
        // entries not read since they joined it (c), then those read again (a, b), each oldest first.
        let expected: [String] =
            policy == .lfu ? ["d", "c", "b", "a"] : policy == .lru ? ["d", "a", "b", "c"] : ["d", "c", "a", "b"]
        let closing: DispatchGroup
        do {
            let cache = try builder.build()
            closing = try #require(cache.disk).closing.group
            for key in ["a", "b", "c", "d"] { cache[key] = key }
            await cache.flush()
            for _ in 0..<3 { _ = cache["a"] }
            _ = cache["b"]
            _ = cache["b"]
            _ = cache["c"]
            await cache.flush()
            #expect(cache.disk?.keysInEvictionOrder == expected)
        }
        // The order reads made is saved when the store closes, which its writer may delay a moment.
        #expect(await waitUntilClosed(closing))
        let reopened = try builder.build(sharingStore: false)
        #expect(reopened.disk?.keysInEvictionOrder == expected)
    }

    @Test func aNewCacheFindsWhatAnEarlierOneWrote() async throws {
        let folder = TemporaryDirectory()
        do {
            let cache = try folder.stringBuilder().build()
            for index in 0..<50 { cache["key \(index)"] = "value \(index)" }
            await cache.flush()
        }
        let reopened = try folder.stringBuilder().build(sharingStore: false)
        #expect(reopened.diskCount == 50)
        for index in 0..<50 { #expect(reopened["key \(index)"] == "value \(index)") }
    }

    @Test func twoCachesOnOneContainerAgree() async throws {
        let folder = TemporaryDirectory()
        let first = try folder.stringBuilder().build()
        let second = try folder.stringBuilder().build()
        #expect(first.disk === second.disk)
        first["k"] = "1"
        #expect(second["k"] == "1")
        second["k"] = "2"
        #expect(first["k"] == "2")
        first.removeValue(forKey: "k")
        #expect(second["k"] == nil)
        await first.flush()
        #expect(second.diskCount == 0)
    }

    @Test func cachesOfDifferentValueTypesOnOneContainerAreRefused() async throws {
        let folder = TemporaryDirectory()
        let strings = try folder.stringBuilder().build()
        strings["k"] = "text"
        let error = #expect(throws: CacheError.invalidConfiguration) { try folder.dataBuilder().build() }
        #expect(error?.message.contains("Swift.String") == true)
        #expect(error?.message.contains("Data") == true)
        #expect(strings["k"] == "text")
    }

    @Test func cachesOnOneContainerAgreeAfterAClear() async throws {
        let folder = TemporaryDirectory()
        let first = try folder.stringBuilder().build()
        let second = try folder.stringBuilder().build()
        first["k"] = "1"
        #expect(second["k"] == "1")
        second.removeAll()
        #expect(first["k"] == nil)
        #expect(second["k"] == nil)
    }

    @Test func aContainerReachedThroughASymbolicLinkSharesOneStore() throws {
        let folder = TemporaryDirectory()
        let real = folder.url.appendingPathComponent("real")
        let link = folder.url.appendingPathComponent("link")
        try FileManager.default.createDirectory(at: real, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: real)
        let first = try CacheBuilder<String>(serializer: StringSerializer()).containerName("c").directory(link).build()
        let second = try CacheBuilder<String>(serializer: StringSerializer()).containerName("c").directory(real).build()
        #expect(first.disk === second.disk)
    }

    @Test func openingAnOpenContainerWithOtherLimitsIsAnError() throws {
        let folder = TemporaryDirectory()
        let first = try folder.stringBuilder().maxDiskCount(10).build()
        #expect(throws: CacheError.invalidConfiguration) { try folder.stringBuilder().maxDiskCount(20).build() }
        #expect(throws: CacheError.invalidConfiguration) {
            try folder.stringBuilder().maxDiskCount(10).evictionPolicy(.lru).build()
        }
        #expect(try folder.stringBuilder().maxDiskCount(10).maxRamCount(3).build().disk === first.disk)
    }
}
