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

    @Test(.timeLimit(.minutes(1)), arguments: EvictionPolicy.allCases)
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
        for index in 0..<store.shardCount { total += store.withShard(index) { $0.capacity } }
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

    @Test(.timeLimit(.minutes(1)), arguments: EvictionPolicy.allCases)
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
}
