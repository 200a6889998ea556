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
}
