import HoardTestSupport
import Testing

@testable import Hoard

/// A slow, obviously correct model of the eviction order: counts and last-access times per key.
private struct ReferenceOrder {
    let policy: EvictionPolicy
    let agingPeriod: Int
    var countdown: Int
    var clock = 0
    var entries: [Int: (count: Int, lastAccess: Int)] = [:]

    init(policy: EvictionPolicy, agingPeriod: Int) {
        self.policy = policy
        self.agingPeriod = agingPeriod
        countdown = agingPeriod
    }

    mutating func touch(_ key: Int) {
        clock += 1
        let count = entries[key].map { policy == .lru ? 1 : $0.count + 1 } ?? 1
        entries[key] = (count, clock)
        if policy == .lfu {
            countdown -= 1
            if countdown <= 0 {
                countdown = agingPeriod
                for (key, entry) in entries { entries[key] = ((entry.count + 1) / 2, entry.lastAccess) }
            }
        }
    }

    var victim: Int? {
        entries.min { ($0.value.count, $0.value.lastAccess) < ($1.value.count, $1.value.lastAccess) }?.key
    }
}

@Suite struct EvictionIndexTests {
    /// An index after `requests` reads of keys drawn at random below `keys`, each miss then set.
    private static func randomlyUsed(
        policy: EvictionPolicy,
        capacity: Int,
        keys: UInt64,
        requests: Int,
        seed: UInt64
    ) -> EvictionIndex<Int, Int> {
        var index = EvictionIndex<Int, Int>(policy: policy, capacity: capacity)
        var generator = SplitMix64(seed: seed)
        for _ in 0..<requests {
            let key = Int(generator.next() % keys)
            if index.access(key) == nil { index.upsert(key, forKey: key) }
        }
        return index
    }

    @Test func lruEvictsTheLeastRecentlyUsedEntry() {
        var index = EvictionIndex<String, Int>(policy: .lru, capacity: 3)
        index.upsert(1, forKey: "a")
        index.upsert(2, forKey: "b")
        index.upsert(3, forKey: "c")
        #expect(index.access("a") == 1)
        #expect(index.victim?.key == "b")
        #expect(index.popVictim()?.key == "b")
        #expect(index.popVictim()?.key == "c")
        #expect(index.popVictim()?.key == "a")
        #expect(index.popVictim() == nil)
        index.checkInvariants()
    }

    @Test func lfuEvictsTheLeastAccessedThenTheLeastRecentlyUsed() {
        var index = EvictionIndex<String, Int>(policy: .lfu, capacity: 4)
        for key in ["a", "b", "c", "d"] { index.upsert(0, forKey: key) }
        _ = index.access("a")
        _ = index.access("a")
        _ = index.access("c")
        _ = index.access("b")
        // Counts: a 3, b 2, c 2, d 1; c was used before b.
        #expect(index.entriesInEvictionOrder.map(\.key) == ["d", "c", "b", "a"])
        #expect(index.entriesInEvictionOrder.map(\.count) == [1, 2, 2, 3])
        index.checkInvariants()
    }

    @Test func peekAndContainsDoNotCountAsAccesses() {
        var index = EvictionIndex<String, Int>(policy: .lru, capacity: 2)
        index.upsert(1, forKey: "a")
        index.upsert(2, forKey: "b")
        #expect(index.peek("a") == 1)
        #expect(index.contains("a"))
        #expect(index.victim?.key == "a")
    }

    @Test func replacingAValueKeepsOneEntry() {
        var index = EvictionIndex<String, Int>(policy: .lfu, capacity: 2)
        #expect(index.upsert(1, forKey: "a") == nil)
        #expect(index.upsert(2, forKey: "a") == 1)
        #expect(index.count == 1)
        #expect(index.removeValue(forKey: "a") == 2)
        #expect(index.removeValue(forKey: "a") == nil)
        #expect(index.count == 0)
        index.checkInvariants()
    }

    @Test(arguments: EvictionPolicy.allCases)
    func savedOrderIsRestoredByAppending(policy: EvictionPolicy) {
        let index = Self.randomlyUsed(policy: policy, capacity: 100, keys: 50, requests: 500, seed: 7)
        var restored = EvictionIndex<Int, Int>(policy: policy, capacity: 100)
        for entry in index.entriesInEvictionOrder {
            restored.append(entry.payload, forKey: entry.key, count: entry.count)
        }
        #expect(restored.entriesInEvictionOrder.map(\.key) == index.entriesInEvictionOrder.map(\.key))
        if policy == .wTinyLFU {
            // Counts are sketch estimates: restored ones are at least the saved ones (equal unless
            // all four counters of a key collide with more frequent keys').
            for (restored, saved) in zip(restored.entriesInEvictionOrder, index.entriesInEvictionOrder) {
                #expect(restored.count >= saved.count)
            }
        } else {
            #expect(restored.entriesInEvictionOrder.map(\.count) == index.entriesInEvictionOrder.map(\.count))
        }
        restored.checkInvariants()
    }

    /// Appending keys known to be new into room reserved for them (a rebuilt disk index) gives the
    /// order, counts and sketch that appending with a lookup gives, and neither the buffers nor the
    /// table grow on the way; the index then grows past the reserve as usual.
    @Test(arguments: EvictionPolicy.allCases)
    func keysKnownToBeNewAppendIntoReservedRoomAsAppendingDoes(policy: EvictionPolicy) {
        let index = Self.randomlyUsed(policy: policy, capacity: 1_000, keys: 700, requests: 5_000, seed: 11)
        let saved = index.entriesInEvictionOrder
        // An unbounded index, as a disk index may be: its table starts at its smallest.
        var looked = EvictionIndex<Int, Int>(policy: policy, capacity: .max)
        var reserved = EvictionIndex<Int, Int>(policy: policy, capacity: .max)
        reserved.reserveCapacity(saved.count)
        let cells = reserved.table.cells.count
        let room = reserved.entries.storage.capacity
        #expect(cells / 4 * 3 >= saved.count && room >= saved.count)
        for entry in saved {
            looked.append(entry.payload, forKey: entry.key, count: entry.count)
            reserved.appendNew(entry.payload, forKey: entry.key, count: entry.count, hash: entry.key.hashValue)
        }
        #expect(reserved.table.cells.count == cells && reserved.entries.storage.capacity == room)
        let describe = { (index: EvictionIndex<Int, Int>) in
            index.entriesInEvictionOrder.map { "\($0.key)=\($0.payload)×\($0.count)" }
        }
        #expect(describe(reserved) == describe(looked))
        #expect(reserved.entriesInEvictionOrder.map(\.key) == saved.map(\.key))
        for (restored, saved) in zip(reserved.entriesInEvictionOrder, saved) {
            // Under W-TinyLFU counts are sketch estimates: at least the saved ones.
            #expect(policy == .wTinyLFU ? restored.count >= saved.count : restored.count == saved.count)
        }
        reserved.checkInvariants()
        for key in 1_000..<3_000 { reserved.upsert(key, forKey: key) }
        #expect(reserved.count == saved.count + 2_000)
        #expect(reserved.peek(1_234) == 1_234 && reserved.peek(saved[0].key) == saved[0].payload)
        reserved.checkInvariants()
    }

    @Test func agingHalvesCountsAndKeepsRecencyAmongNewEquals() {
        var index = EvictionIndex<String, Int>(policy: .lfu, capacity: 1)
        #expect(index.agingPeriod == 1_024)
        index.upsert(0, forKey: "old")  // count 1, used first
        index.upsert(0, forKey: "hot")
        for _ in 0..<5 { _ = index.access("hot") }  // count 6
        _ = index.access("old")  // count 2, used last
        // 8 operations so far; age now.
        index.age()
        // (2 + 1) / 2 = 1 and (6 + 1) / 2 = 3.
        #expect(index.entriesInEvictionOrder.map(\.key) == ["old", "hot"])
        #expect(index.entriesInEvictionOrder.map(\.count) == [1, 3])
        index.upsert(0, forKey: "new")
        // "old" (count 1) was used before "new" (count 1): it goes first.
        #expect(index.victim?.key == "old")
        index.checkInvariants()
    }

    @Test func agingKeepsRecencyAcrossTheClockWrapping() {
        var index = EvictionIndex<String, Int>(policy: .lfu, capacity: 4)
        index.clock = UInt32.max - 2
        index.upsert(0, forKey: "a")  // count 1, stamped max - 1
        index.upsert(0, forKey: "b")  // stamped max
        _ = index.access("b")  // count 2: the clock would wrap, so every entry is restamped first
        index.upsert(0, forKey: "c")  // count 1
        #expect(index.clock == 4)
        // Counts 1 and 2 both halve to 1: the merge must order a, b, c by their last access.
        index.age()
        #expect(index.entriesInEvictionOrder.map(\.key) == ["a", "b", "c"])
        #expect(index.entriesInEvictionOrder.map(\.count) == [1, 1, 1])
        index.checkInvariants()
    }

    @Test func theClocksStartDoesNotChangeTheOrder() {
        // Stamps only compare with each other: an index whose clock starts just short of wrapping
        // must keep the very order of one whose clock starts at 0. 64 keys fill the index and are
        // then accessed at random; the wrap falls at the 1 000th operation, and the first aging, at
        // the 1 024th, merges frequency buckets whose entries were stamped on both sides of it.
        var fresh = EvictionIndex<Int, Int>(policy: .lfu, capacity: 64)
        var wrapping = EvictionIndex<Int, Int>(policy: .lfu, capacity: 64)
        wrapping.clock = UInt32.max - 1_000
        for key in 0..<64 {
            fresh.upsert(key, forKey: key)
            wrapping.upsert(key, forKey: key)
        }
        var generator = SplitMix64(seed: 4)
        for step in 0..<3_000 {
            let key = Int(generator.next() % 64)
            #expect(fresh.access(key) == wrapping.access(key))
            let order = { (index: EvictionIndex<Int, Int>) in
                index.entriesInEvictionOrder.map { "\($0.key):\($0.count)" }
            }
            guard order(fresh) == order(wrapping) else {
                Issue.record("orders differ at step \(step): \(order(fresh)) vs \(order(wrapping))")
                return
            }
        }
        #expect(wrapping.clock < fresh.clock)  // renumbered
        fresh.checkInvariants()
        wrapping.checkInvariants()
    }

    @Test func agingACountAtTheMaximumKeepsTheFrequencyBucketsOrdered() {
        var index = EvictionIndex<String, Int>(policy: .lfu, capacity: 4)
        index.append(0, forKey: "low", count: 2)
        index.append(0, forKey: "max", count: .max)
        index.age()
        #expect(index.entriesInEvictionOrder.map(\.key) == ["low", "max"])
        #expect(index.entriesInEvictionOrder.map(\.count) == [1, UInt32.max / 2 + 1])
        index.checkInvariants()
    }

    @Test func agingLetsANewHotSetDisplaceAnOldOne() {
        // Capacity 10: aging every 1 024 operations. The old hot keys reach high counts, then stop.
        var index = EvictionIndex<Int, Int>(policy: .lfu, capacity: 10)
        for round in 0..<200 {
            for key in 0..<10 {
                if index.access(key) == nil { index.upsert(key, forKey: key) }
                _ = round
            }
        }
        // A new hot set, accessed steadily, must end up holding the cache.
        for _ in 0..<3_000 {
            for key in 100..<105 {
                if index.access(key) == nil {
                    if index.count >= 10 { _ = index.popVictim() }
                    index.upsert(key, forKey: key)
                }
            }
        }
        for key in 100..<105 { #expect(index.contains(key)) }
        index.checkInvariants()
    }

    // The reference model knows LRU and LFU; W-TinyLFU has its own tests (WindowTinyLFUTests).
    @Test(arguments: [EvictionPolicy.lru, .lfu])
    func matchesAReferenceModelOnRandomOperations(policy: EvictionPolicy) {
        let capacity = 8
        var index = EvictionIndex<Int, Int>(policy: policy, capacity: capacity)
        var model = ReferenceOrder(policy: policy, agingPeriod: index.agingPeriod)
        var generator = SplitMix64(seed: policy == .lru ? 1 : 2)
        for step in 0..<20_000 {
            let key = Int(generator.next() % 20)
            switch generator.next() % 10 {
            case 0:
                #expect(
                    index.removeValue(forKey: key) != nil
                        ? model.entries.removeValue(forKey: key) != nil : model.entries[key] == nil
                )
            case 1...4:
                let hit = index.access(key) != nil
                #expect(hit == (model.entries[key] != nil))
                if hit { model.touch(key) }
            default:
                if !index.contains(key) && index.count >= capacity {
                    let victim = index.popVictim()?.key
                    #expect(victim == model.victim, "step \(step)")
                    if let victim { model.entries[victim] = nil }
                }
                index.upsert(key, forKey: key)
                model.touch(key)
            }
            #expect(index.count == model.entries.count)
            if step % 997 == 0 { index.checkInvariants() }
        }
        index.checkInvariants()
    }

    /// The evicting set's shortcut (the new entry takes the victim's slot) must leave the same
    /// entries in the same order as a pop then an insert, under every policy.
    @Test(arguments: EvictionPolicy.allCases)
    func replacingTheVictimMatchesAPopThenAnInsert(policy: EvictionPolicy) {
        let capacity = 64
        var popped = EvictionIndex<Int, Int>(policy: policy, capacity: capacity)
        var replaced = EvictionIndex<Int, Int>(policy: policy, capacity: capacity)
        var generator = SplitMix64(seed: 23)
        var replacements = 0
        for step in 0..<30_000 {
            // A skewed key space, so that hits, duels won and duels lost all happen.
            let key = Int(generator.next() % (generator.next() % 4 == 0 ? 400 : 90))
            switch generator.next() % 10 {
            case 0:
                #expect(popped.removeValue(forKey: key) == replaced.removeValue(forKey: key))
            case 1...4:
                #expect(popped.access(key) == replaced.access(key))
            default:
                // Costs from the second half on, so that the first one makes the cost buffer.
                let cost = step < 15_000 ? 0 : key % 7
                if popped.contains(key) || popped.count < capacity {
                    popped.upsert(step, forKey: key, cost: cost)
                    replaced.upsert(step, forKey: key, cost: cost)
                } else {
                    let victim = popped.popVictim()
                    popped.insert(newKey: key, hash: key.hashValue, payload: step, cost: cost)
                    let replacedVictim = replaced.replaceVictim(
                        withNewKey: key,
                        hash: key.hashValue,
                        payload: step,
                        cost: cost
                    )
                    #expect(replacedVictim?.key == victim?.key && replacedVictim?.payload == victim?.payload)
                    replacements += 1
                }
            }
            if step % 101 == 0 { expectSameOrder(replaced, popped, "step \(step)") }
        }
        expectSameOrder(replaced, popped, "at the end")
        #expect(replacements > 1_000)
        #expect(replaced.totalCost > 0)
    }

    /// Checks that two indexes hold the same entries, with the same counts and costs, in the same
    /// eviction order.
    private func expectSameOrder(_ index: EvictionIndex<Int, Int>, _ reference: EvictionIndex<Int, Int>, _ when: String)
    {
        func order(_ index: EvictionIndex<Int, Int>) -> [String] {
            index.entriesInEvictionOrder.map { "\($0.key)=\($0.payload)×\($0.count)+\(index.peekCost($0.key))" }
        }
        #expect(order(index) == order(reference), "\(when)")
        #expect(index.totalCost == reference.totalCost, "\(when)")
        index.checkInvariants()
    }

    @Test func replacingTheVictimOfAnEmptyIndexInsertsTheKey() {
        for policy in EvictionPolicy.allCases {
            var index = EvictionIndex<String, Int>(policy: policy, capacity: 4)
            #expect(index.replaceVictim(withNewKey: "a", hash: "a".hashValue, payload: 1) == nil)
            #expect(index.peek("a") == 1 && index.count == 1)
            index.checkInvariants()
        }
    }
}
