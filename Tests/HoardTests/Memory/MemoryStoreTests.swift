import HoardTestSupport
import Testing

@testable import Hoard

@Suite struct MemoryStoreTests {
    @Test func keepsAtMostItsCapacityAndReportsEachEviction() {
        let store = MemoryStore<String, Int>(capacity: 2, policy: .lru)
        #expect(store.set(1, forKey: "a") == nil)
        #expect(store.set(2, forKey: "b") == nil)
        let evicted = store.set(3, forKey: "c")
        #expect(evicted?.key == "a")
        #expect(evicted?.value == 1)
        #expect(store.count == 2)
        #expect(store.value(forKey: "a") == nil)
        #expect(store.value(forKey: "c") == 3)
    }

    @Test func replacingAKeyEvictsNothing() {
        let store = MemoryStore<String, Int>(capacity: 2, policy: .lfu)
        store.set(1, forKey: "a")
        store.set(2, forKey: "b")
        #expect(store.set(3, forKey: "a") == nil)
        #expect(store.value(forKey: "a") == 3)
        #expect(store.count == 2)
    }

    @Test(arguments: EvictionPolicy.allCases)
    func replacingAKeyInAFullStoreCountsAsAUse(policy: EvictionPolicy) {
        let store = MemoryStore<String, Int>(capacity: 2, policy: policy)
        store.set(1, forKey: "a")
        store.set(2, forKey: "b")
        #expect(store.set(3, forKey: "a") == nil)
        // "a" was used again, after "b": the more recent (LRU) and used more often (LFU).
        #expect(store.set(4, forKey: "c")?.key == "b")
        if policy == .wTinyLFU {
            // Its second use made "a" an incumbent of main seen twice: "b", back in the window and
            // seen twice too, does not beat it by the two an incumbent needs. Had the set not
            // counted, "a" would be a probation entry seen once, and "b" would win.
            store.set(5, forKey: "b")
            #expect(store.set(6, forKey: "e")?.key == "b")
        }
        #expect(store.value(forKey: "a") == 3)
        #expect(store.count == 2)
    }

    @Test func newValueStaysEvenWhenEveryOtherEntryIsMoreFrequent() {
        let store = MemoryStore<String, Int>(capacity: 2, policy: .lfu)
        store.set(1, forKey: "a")
        store.set(2, forKey: "b")
        for _ in 0..<5 {
            _ = store.value(forKey: "a")
            _ = store.value(forKey: "b")
        }
        #expect(store.set(3, forKey: "c")?.key == "a")
        #expect(store.value(forKey: "c") == 3)
    }

    @Test func removeAllEmptiesTheStore() {
        let store = MemoryStore<String, Int>(capacity: 10, policy: .lfu)
        for index in 0..<5 { store.set(index, forKey: "\(index)") }
        #expect(store.removeAll() == 5)
        #expect(store.count == 0)
        #expect(store.value(forKey: "1") == nil)
    }

    @Test(.timeLimit(.minutes(10)), arguments: EvictionPolicy.allCases)
    func staysConsistentUnderConcurrentUse(policy: EvictionPolicy) async {
        let store = MemoryStore<Int, Int>(capacity: 16, policy: policy)
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    var generator = SplitMix64(seed: UInt64(task))
                    for _ in 0..<20_000 {
                        let key = Int(generator.next() % 40)
                        switch generator.next() % 4 {
                        case 0: store.set(key, forKey: key)
                        case 1: store.removeValue(forKey: key)
                        default:
                            if let value = store.value(forKey: key) { precondition(value == key) }
                        }
                    }
                }
            }
        }
        #expect(store.count <= 16)
        store.checkInvariants()
    }

    @Test func smallOrCostedStoresHaveOneShardAndLargeOnesSeveral() {
        // Each shard keeps at least 8 192 entries.
        #expect(MemoryStore<Int, Int>(capacity: 16_383, policy: .lru).shardCount == 1)
        #expect(MemoryStore<Int, Int>(capacity: 16_384, policy: .lru).shardCount == 2)
        #expect(MemoryStore<Int, Int>(capacity: 100_000, policy: .lru).shardCount == 8)
        #expect(MemoryStore<Int, Int>(capacity: 10_000_000, policy: .lru).shardCount == 16)
        #expect(MemoryStore<Int, Int>(capacity: 100_000, policy: .lru, sharded: false).shardCount == 1)
        let store = MemoryStore<Int, Int>(capacity: 40_001, policy: .lfu)
        #expect(store.shardCount == 4)
        var total = 0
        for index in 0..<store.shardCount { total += store.withShard(index) { $0.share } }
        #expect(total == 40_001)
    }

    @Test(arguments: EvictionPolicy.allCases)
    func aShardedStoreKeepsItsLimitsAndAlwaysKeepsTheNewValue(policy: EvictionPolicy) {
        let store = MemoryStore<String, Int>(capacity: 16_384, policy: policy)
        #expect(store.shardCount == 2)
        var generator = SplitMix64(seed: 21)
        var evictions = 0
        for step in 0..<60_000 {
            let key = "k\(generator.next() % 40_000)"
            switch generator.next() % 10 {
            case 0..<6:
                if store.set(step, forKey: key) != nil { evictions += 1 }
                #expect(store.peek(key) == step)
            case 6:
                store.removeValue(forKey: key)
                #expect(store.peek(key) == nil)
            default:
                _ = store.value(forKey: key)
            }
        }
        #expect(store.count <= 16_384)
        #expect(evictions > 0)
        store.checkInvariants()
    }

    @Test(.timeLimit(.minutes(10)), arguments: EvictionPolicy.allCases)
    func aShardedStoreStaysConsistentUnderConcurrentUse(policy: EvictionPolicy) async {
        let store = MemoryStore<Int, Int>(capacity: 16_384, policy: policy)
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    var generator = SplitMix64(seed: UInt64(task))
                    for _ in 0..<20_000 {
                        let key = Int(generator.next() % 30_000)
                        switch generator.next() % 4 {
                        case 0: store.set(key, forKey: key)
                        case 1: store.removeValue(forKey: key)
                        default:
                            if let value = store.value(forKey: key) { precondition(value == key) }
                        }
                    }
                }
            }
        }
        #expect(store.count <= 16_384)
        store.checkInvariants()
    }

    @Test(.timeLimit(.minutes(10)), arguments: EvictionPolicy.allCases)
    func aFullShardedStoreCountsItsRoomExactlyUnderConcurrentUse(policy: EvictionPolicy) async {
        // Mostly new keys: the store stays full, shards below their share evict from the others,
        // and removals make room that every shard must see.
        let capacity = 16_384
        let store = MemoryStore<Int, Int>(capacity: capacity, policy: policy)
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<4 {
                group.addTask {
                    var generator = SplitMix64(seed: UInt64(task) &+ 100)
                    for _ in 0..<15_000 {
                        let key = Int(generator.next() % 40_000)
                        switch generator.next() % 20 {
                        case 0: store.removeValue(forKey: key)
                        case 1..<14: store.set(key, forKey: key)
                        default:
                            if let value = store.value(forKey: key) { precondition(value == key) }
                        }
                    }
                }
            }
        }
        store.checkInvariants()
        let count = store.count
        #expect(count <= capacity)
        // Whatever the removals left free, new keys fill without evicting.
        #expect(evictions(settingEachOf: 100_000..<100_000 + capacity - count, in: store) == 0)
        #expect(store.count == capacity)
        store.checkInvariants()
    }

    /// Sets `keys` in turn; returns how many of the sets evicted.
    private func evictions(settingEachOf keys: some Sequence<Int>, in store: MemoryStore<Int, Int>) -> Int {
        var evictions = 0
        for key in keys where store.set(key, forKey: key) != nil { evictions += 1 }
        return evictions
    }

    @Test(arguments: EvictionPolicy.allCases, [16_384, 40_000])
    func aShardedStoreHoldsEveryDistinctValueUpToItsCapacity(policy: EvictionPolicy, capacity: Int) {
        // Keys never spread evenly over the shards: with a limit per shard, 100 000 sets into a
        // capacity of 100 000 kept 99 633 values.
        let store = MemoryStore<Int, Int>(capacity: capacity, policy: policy)
        #expect(store.shardCount > 1)
        var stored = 0
        for end in [capacity / 3, capacity - 1, capacity] {
            #expect(evictions(settingEachOf: stored..<end, in: store) == 0)
            stored = end
            #expect(store.count == stored)
        }
        // Full: every new key evicts exactly one value, and stays.
        let more = capacity / 8
        #expect(evictions(settingEachOf: capacity..<capacity + more, in: store) == more)
        #expect(store.count == capacity)
        #expect(store.peek(capacity + more - 1) == capacity + more - 1)
        store.checkInvariants()
    }

    @Test func aStoreOfAMillionHoldsAMillionDistinctValues() {
        // One policy only: a million sets take seconds in a debug build, and ten times that under
        // ThreadSanitizer. The shards' shared limit is the same code under every policy (see the
        // test above for all three).
        let capacity = 1_000_000
        let store = MemoryStore<Int, Int>(capacity: capacity, policy: .lru)
        #expect(store.shardCount == 16)
        #expect(evictions(settingEachOf: 0..<capacity, in: store) == 0)
        #expect(store.count == capacity)
        #expect(evictions(settingEachOf: capacity..<capacity + 1_000, in: store) == 1_000)
        #expect(store.count == capacity)
    }

    @Test(arguments: EvictionPolicy.allCases)
    func aFullShardedStoreRefillsTheRoomARemovalMade(policy: EvictionPolicy) {
        let capacity = 40_000
        let store = MemoryStore<Int, Int>(capacity: capacity, policy: policy)
        #expect(evictions(settingEachOf: 0..<capacity + 1_000, in: store) == 1_000)
        var removed = 0
        for key in stride(from: 0, to: capacity + 1_000, by: 97) where store.removeValue(forKey: key) != nil {
            removed += 1
        }
        #expect(removed > 0)
        #expect(store.count == capacity - removed)
        store.checkInvariants()
        // The new keys land in every shard, each of which saw the store full before the removals.
        let newKeys = capacity + 1_000..<capacity + 1_000 + removed
        #expect(evictions(settingEachOf: newKeys, in: store) == 0)
        #expect(store.count == capacity)
        #expect(store.set(-1, forKey: -1) != nil)
        store.removeAll()
        #expect(evictions(settingEachOf: 0..<capacity, in: store) == 0)
        store.checkInvariants()
    }

    @Test(arguments: EvictionPolicy.allCases)
    func oneShardMayHoldTheWholeCapacityAndGivesItBackToTheOthers(policy: EvictionPolicy) {
        // Every key of the first phase lands in shard 0: it holds twice its share, W-TinyLFU's
        // window and sketch included, which are sized for its share.
        let capacity = 16_384
        let store = MemoryStore<Int, Int>(capacity: capacity, policy: policy)
        #expect(store.shardCount == 2)
        let inFirstShard = Array((0...).lazy.filter { store.shard(for: $0.hashValue) == 0 }.prefix(capacity + 500))
        let inSecondShard = Array((0...).lazy.filter { store.shard(for: $0.hashValue) == 1 }.prefix(2_000))
        #expect(evictions(settingEachOf: inFirstShard, in: store) == 500)
        #expect(store.withShard(0) { $0.index.count } == capacity)
        for _ in 0..<3 { _ = inFirstShard.suffix(1_000).map { store.value(forKey: $0) } }
        store.checkInvariants()
        // Shard 1 holds less than its share, so its new keys evict from shard 0.
        #expect(evictions(settingEachOf: inSecondShard, in: store) == 2_000)
        #expect(store.count == capacity)
        #expect(store.withShard(1) { $0.index.count } == 2_000)
        #expect(inSecondShard.allSatisfy { store.peek($0) == $0 })
        store.checkInvariants()
    }
}
