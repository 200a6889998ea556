import Dispatch
import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// The memory level's limits where they meet concurrency: clears racing sets in a full sharded
/// store, cost changes racing each other, and eviction reports under concurrent sets.
@Suite(.validatesCacheInvariants) struct MemoryLimitSeamTests {
    @Test(.timeLimit(.minutes(5)), arguments: EvictionPolicy.allCases)
    func aFullShardedStoreCountsItsRoomWhenClearsRaceSets(policy: EvictionPolicy) {
        let capacity = 32_768
        let store = MemoryStore<Int, Int>(capacity: capacity, policy: policy)
        #expect(store.shardCount == 4)
        for key in 0..<capacity { store.set(key, forKey: key) }
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for step in 0..<12_000 {
                let key = capacity + thread * 1_000_000 + step
                if thread == 3 && step % 3_000 == 0 {
                    store.removeAll()
                } else {
                    store.set(key, forKey: key)
                }
            }
        }
        store.checkInvariants()
        let count = store.count
        #expect(count <= capacity)
        var evictions = 0
        for key in -(capacity - count)..<0 where store.set(key, forKey: key) != nil { evictions += 1 }
        #expect(evictions == 0)
        #expect(store.count == capacity)
        store.checkInvariants()
    }

    @Test(.timeLimit(.minutes(5)), arguments: EvictionPolicy.allCases)
    func aCostedLevelKeepsItsLimitsWhenCostsChangeConcurrently(policy: EvictionPolicy) async throws {
        let level = MemoryCacheLevel<Int, Int>(capacity: 50, costLimit: 1_000, policy: policy, cost: { $0 })
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            var generator = SplitMix64(seed: UInt64(thread) &+ 7)
            for _ in 0..<20_000 {
                let key = Int(generator.next() % 80)
                switch generator.next() % 10 {
                case 0: level.store.removeValue(forKey: key)
                case 1: precondition(level.store.totalCost <= 1_000)
                default:
                    // Costs of one key change from set to set; some exceed the whole limit.
                    let cost = Int(generator.next() % 1_100)
                    _ = level.store.set(cost, forKey: key, cost: cost, costLimit: 1_000)
                }
            }
        }
        level.store.checkInvariants()
        #expect(level.totalCost <= 1_000)
        #expect(level.count <= 50)
        #expect(level.totalCost == level.store.keysInEvictionOrder.reduce(0) { $0 + (level.store.peek($1) ?? 0) })
    }

    @Test(.timeLimit(.minutes(5)), arguments: EvictionPolicy.allCases)
    func aMemoryOnlyCacheReportsEachEvictionOnceUnderConcurrentSets(policy: EvictionPolicy) throws {
        let folder = TemporaryDirectory()
        let delegate = RecordingDelegate<String>()
        let capacity = 16_384
        let cache = try folder.stringBuilder().maxRamCount(capacity).maxDiskCount(0).evictionPolicy(policy)
            .delegate(delegate).build()
        let perThread = 5_000
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for step in 0..<perThread { cache.set("v", forKey: "t\(thread)-\(step)") }
        }
        let total = 4 * perThread
        let evicted = delegate.memoryEvictions
        #expect(Set(evicted).count == evicted.count)
        #expect(cache.memoryCount == capacity)
        #expect(evicted.count == total - capacity)
        #expect(cache.statistics.memoryEvictions == total - capacity)
        cache.onMemoryWarning()
        #expect(delegate.memoryEvictions.count == total)
        #expect(Set(delegate.memoryEvictions).count == total)
        #expect(cache.statistics.evictionsByReason[.memoryPressure] == capacity)
        #expect(cache.memoryCount == 0)
    }

    @Test(.timeLimit(.minutes(5)), arguments: EvictionPolicy.allCases)
    func everyValueIsEvictedOnceOrKeptWhenMemoryWarningsRaceSets(policy: EvictionPolicy) throws {
        let folder = TemporaryDirectory()
        let delegate = RecordingDelegate<String>()
        let capacity = 16_384
        let cache = try folder.stringBuilder().maxRamCount(capacity).maxDiskCount(0).evictionPolicy(policy)
            .delegate(delegate).build()
        let perThread = 8_000
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for step in 0..<perThread {
                if thread == 3 && step % 2_000 == 1_999 {
                    cache.onMemoryWarning()
                } else {
                    cache.set("v", forKey: "t\(thread)-\(step)")
                }
            }
        }
        let evicted = delegate.memoryEvictions
        #expect(Set(evicted).count == evicted.count)
        let remaining = cache.memoryCount
        let setCount = 4 * perThread - perThread / 2_000
        #expect(evicted.count + remaining == setCount)
        let statistics = cache.statistics
        #expect(statistics.memoryEvictions == evicted.count)
        #expect(
            (statistics.evictionsByReason[.capacity] ?? 0) + (statistics.evictionsByReason[.memoryPressure] ?? 0)
                == evicted.count
        )
        // Whatever the warnings left free, new keys fill without evicting.
        let before = delegate.memoryEvictions.count
        for key in 0..<(capacity - remaining) { cache.set("w", forKey: "refill-\(key)") }
        #expect(delegate.memoryEvictions.count == before)
        #expect(cache.memoryCount == capacity)
    }

    @Test(.timeLimit(.minutes(5)), arguments: EvictionPolicy.allCases)
    func evictionCallbacksThatSetKeysKeepTheCountExact(policy: EvictionPolicy) throws {
        let folder = TemporaryDirectory()
        let delegate = RecordingDelegate<String>()
        let capacity = 16_384
        let reentered = Locked(0)
        delegate.onEvent = { cache, event in
            guard case .memoryEviction(let key) = event, !key.hasPrefix("again-") else { return }
            // Some evictions of a first-generation key set a key of their own, which evicts in turn
            // (a bounded chain: each level of it is a nested call).
            let reenters = reentered.withLock { count -> Bool in
                guard count < 200 else { return false }
                count += 1
                return true
            }
            guard reenters else { return }
            cache.set("again", forKey: "again-\(key)")
        }
        let cache = try folder.stringBuilder().maxRamCount(capacity).maxDiskCount(0).evictionPolicy(policy)
            .delegate(delegate).build()
        let perThread = 5_000
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for step in 0..<perThread { cache.set("v", forKey: "t\(thread)-\(step)") }
        }
        let total = 4 * perThread + reentered.withLock { $0 }
        let evicted = delegate.memoryEvictions
        #expect(Set(evicted).count == evicted.count)
        #expect(cache.memoryCount == capacity)
        #expect(evicted.count == total - capacity)
        #expect(cache.statistics.memoryEvictions == evicted.count)
    }

    @Test(.timeLimit(.minutes(5)), arguments: EvictionPolicy.allCases)
    func expiredValuesAreEvictedOnceWhenReadsRaceTheSweep(policy: EvictionPolicy) throws {
        let folder = TemporaryDirectory()
        let delegate = RecordingDelegate<String>()
        let clock = ManualClock()
        let capacity = 16_384
        let cache = try folder.stringBuilder().maxRamCount(capacity).maxDiskCount(0).evictionPolicy(policy)
            .clock(clock.read).expiry(.seconds(10)).delegate(delegate).build()
        for key in 0..<capacity { cache.set("v", forKey: "\(key)") }
        clock.advance(by: 11)
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            if thread == 3 {
                cache.removeExpired()
            } else {
                for key in stride(from: thread, to: capacity, by: 3) { #expect(cache.value(forKey: "\(key)") == nil) }
            }
        }
        let evicted = delegate.memoryEvictions
        #expect(Set(evicted).count == evicted.count)
        #expect(evicted.count == capacity)
        #expect(cache.memoryCount == 0)
        #expect(cache.statistics.evictionsByReason[.expired] == capacity)
        #expect(cache.statistics.memoryHits == 0)
    }

    @Test(.timeLimit(.minutes(5)), arguments: EvictionPolicy.allCases)
    func aCostedCacheKeepsItsBudgetWhenSetsAndDiskCopiesRace(policy: EvictionPolicy) async throws {
        let folder = TemporaryDirectory()
        let delegate = RecordingDelegate<String>()
        let cache = try folder.stringBuilder().maxRamCount(40).maxRamCost(2_000).evictionPolicy(policy)
            .delegate(delegate).build()
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            var generator = SplitMix64(seed: UInt64(thread) &+ 99)
            for _ in 0..<3_000 {
                let key = "k\(generator.next() % 120)"
                switch generator.next() % 6 {
                case 0: cache.clearMemory()
                case 1, 2: cache.set(String(repeating: "x", count: Int(generator.next() % 700)), forKey: key)
                default: _ = cache.value(forKey: key)
                }
            }
        }
        await cache.flush()
        #expect(cache.memoryCost <= 2_000)
        #expect(cache.memoryCount <= 40)
        let evicted = delegate.memoryEvictions
        #expect(cache.statistics.memoryEvictions == evicted.count)
        #expect(evicted.count > 0)
    }
}
