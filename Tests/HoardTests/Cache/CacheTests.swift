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
            #expect(cache.disk?.keysInEvictionOrder == (policy == .lfu ? ["d", "c", "b", "a"] : ["d", "a", "b", "c"]))
        }
        // The order reads made is saved when the store closes, which its writer may delay a moment.
        #expect(await waitUntilClosed(closing))
        let reopened = try builder.build(sharingStore: false)
        #expect(reopened.disk?.keysInEvictionOrder == (policy == .lfu ? ["d", "c", "b", "a"] : ["d", "a", "b", "c"]))
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

    @Test(.timeLimit(.minutes(5)))
    func aDelegateMayReenterTheCacheDuringEviction() async throws {
        let folder = TemporaryDirectory()
        let delegate = RecordingDelegate<String>()
        // LFU: every key is set once, so memory evicts them oldest first, which the checks below need.
        let cache = try folder.stringBuilder().maxRamCount(2).maxDiskCount(10).evictionPolicy(.lfu)
            .delegate(delegate).build()
        let seen = Protected<[(key: String, value: String?)]>([])
        delegate.onEvent = { cache, event in
            switch event {
            case .memoryEviction(let key):
                // Reading the evicted key goes to disk (or the pending table) and back into memory.
                let value = cache[key]
                seen.withLock { $0.append((key, value)) }
                _ = cache.memoryCount
                _ = cache.diskCount
            case .diskEviction(let key):
                cache["re-\(key)"] = "from the disk eviction callback"
                cache.removeValue(forKey: "re-\(key)")
            default: break
            }
        }
        for index in 0..<20 { cache["\(index)"] = "v\(index)" }
        await cache.flush()
        #expect(!delegate.memoryEvictions.isEmpty)
        #expect(!delegate.diskEvictions.isEmpty)
        let reads = seen.withLock { $0 }
        #expect(!reads.isEmpty)
        // A key evicted from memory is still on disk (or pending) unless disk evicted it too; whatever
        // is read is that key's own value.
        let ownKeys = reads.filter { !$0.key.hasPrefix("re-") }
        #expect(ownKeys.allSatisfy { $0.value == nil || $0.value == "v" + $0.key })
        // Keys "0"..."7" leave memory before key "10" is set, so before disk holds more than its 10
        // entries: disk cannot have evicted them yet, however far the writer got.
        for index in 0..<8 {
            #expect(ownKeys.first { $0.key == "\(index)" }?.value == "v\(index)", "key \(index)")
        }
        await cache.flush()
        #expect(cache.diskCount <= 10)
        cache.memory?.checkInvariants()
    }

    @Test(.timeLimit(.minutes(5)), arguments: EvictionPolicy.allCases)
    func eightTasksHammeringOneCacheStayConsistent(policy: EvictionPolicy) async throws {
        let folder = TemporaryDirectory()
        // Disk holds every key (no disk eviction), so memory and disk must agree on each one.
        let builder = folder.stringBuilder().maxRamCount(8).maxDiskCount(24).evictionPolicy(policy)
        let cache = try builder.build()
        let wrongValues = Counter()
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    var generator = SplitMix64(seed: UInt64(task) + 100)
                    for sequence in 0..<2_000 {
                        let key = "k\(generator.next() % 24)"
                        switch generator.next() % 8 {
                        case 0: cache.removeValue(forKey: key)
                        case 1, 2: cache[key] = "\(key)/\(task)/\(sequence)"
                        case 3: if generator.next() % 50 == 0 { cache.clearMemory() }
                        default:
                            if let value = cache[key], !value.hasPrefix(key + "/") { wrongValues.increment() }
                        }
                    }
                }
            }
        }
        await cache.flush()
        #expect(wrongValues.value == 0)
        #expect(cache.diskCount <= 24)
        #expect(folder.entryFiles().count == cache.diskCount)
        #expect(cache.memoryCount <= 8)
        cache.memory?.checkInvariants()
        // Memory and disk agree on every key: whatever memory holds is what disk holds.
        let disk = try builder.maxRamCount(0).build(sharingStore: false)
        for index in 0..<24 {
            let key = "k\(index)"
            if let inMemory = cache.memory?.value(forKey: key)?.value { #expect(disk[key] == inMemory, "\(key)") }
        }
    }

    @Test(.timeLimit(.minutes(5)), arguments: ["set", "remove"])
    func aWriteIsNeverUndoneByAConcurrentDiskRead(change: String) async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().build()
        let stop = Protected(false)
        let stale = Counter()
        async let reader: Void = onPlainThread {
            while !stop.withLock({ $0 }) {
                cache.clearMemory()
                _ = cache["k"]
            }
        }
        await onPlainThread {
            for index in 0..<3_000 {
                cache["k"] = "\(index)"
                if change == "remove" { cache.removeValue(forKey: "k") }
                // Read your own write: a reader must not have put an older value in memory.
                if cache["k"] != (change == "set" ? "\(index)" : nil) { stale.increment() }
            }
            stop.withLock { $0 = true }
        }
        await reader
        #expect(stale.value == 0)
    }

    @Test(.timeLimit(.minutes(5)))
    func concurrentSetsOfOneKeyLeaveBothLevelsAgreeing() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().build()
        // Each round waits for a file write: a hundred give the race its chances without making a
        // loaded machine run out of time.
        for round in 0..<100 {
            async let first: Void = onPlainThread { cache["k"] = "a\(round)" }
            async let second: Void = onPlainThread { cache["k"] = "b\(round)" }
            _ = await (first, second)
            await cache.flush()
            let inMemory = cache.memory?.value(forKey: "k")?.value
            guard case .stored(let entry) = cache.disk?.lookup(DiskKey("k")) else {
                Issue.record("round \(round): nothing on disk")
                return
            }
            #expect(inMemory == String(decoding: entry.payload, as: UTF8.self), "round \(round)")
        }
    }

    @Test func removeAllLeavesNoValueEvenWhenTheDelegateReadsDuringIt() async throws {
        let folder = TemporaryDirectory()
        let delegate = RecordingDelegate<String>()
        let cache = try folder.stringBuilder().delegate(delegate).build()
        delegate.onEvent = { cache, event in
            if event == .willClearDisk { _ = cache["k"] }
        }
        cache["k"] = "v"
        await cache.flush()
        cache.removeAll()
        #expect(cache["k"] == nil)
        #expect(cache.memoryCount == 0)
    }

    @Test(.timeLimit(.minutes(5)))
    func aDiskEvictionCallbackMayClearTheDisk() async throws {
        let folder = TemporaryDirectory()
        let delegate = RecordingDelegate<String>()
        let cache = try folder.stringBuilder().maxDiskCount(2).delegate(delegate).build()
        // Only the first eviction clears: when the writer overtakes the sets, later sets evict again,
        // and a clear on that eviction would remove "after" below.
        let evictions = Counter()
        delegate.onEvent = { cache, event in
            if case .diskEviction = event, evictions.increment() == 1 { cache.clearDisk() }
        }
        for index in 0..<5 { cache["\(index)"] = "\(index)" }
        await cache.flush()
        #expect(!delegate.diskEvictions.isEmpty)
        #expect(cache.diskCount <= 2)
        cache["after"] = "still works"
        await cache.flush()
        cache.clearMemory()
        #expect(cache["after"] == "still works")
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
