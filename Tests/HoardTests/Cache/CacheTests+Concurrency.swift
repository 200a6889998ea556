import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Concurrent callers, and delegates that call back into the cache while it evicts or clears.
extension CacheTests {
    @Test(.timeLimit(.minutes(10)))
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

    @Test(.timeLimit(.minutes(10)), arguments: EvictionPolicy.allCases)
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

    @Test(.timeLimit(.minutes(10)), arguments: ["set", "remove"])
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

    @Test(.timeLimit(.minutes(10)))
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

    @Test(.timeLimit(.minutes(10)))
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
}
