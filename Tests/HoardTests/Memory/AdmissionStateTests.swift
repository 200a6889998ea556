import HoardTestSupport
import Testing

@testable import Hoard

/// W-TinyLFU's rules: the duel, what the sketch counts, its size and memory, and the region targets.
@Suite struct AdmissionStateTests {
    /// Reads `key`, storing it on a miss after making room.
    @discardableResult
    private func request(_ index: inout EvictionIndex<StableKey, Int>, _ key: Int, capacity: Int) -> Bool {
        if index.access(key) != nil { return true }
        if index.count >= capacity { _ = index.popVictim() }
        index.upsert(key, forKey: key)
        return false
    }

    @Test func theDuelNeedsMoreUseAMarginAgainstIncumbentsAndNothingAgainstIdleVictims() {
        func admits(_ candidate: Int, _ victim: Int, incumbent: Bool = false, idle: UInt32 = 0) -> Bool {
            AdmissionState.admits(
                candidateFrequency: candidate,
                victimFrequency: victim,
                victimIsIncumbent: incumbent,
                victimIdleTime: idle,
                idleThreshold: 300
            )
        }
        #expect(admits(3, 2))
        #expect(!admits(2, 2), "a tie keeps the victim")
        #expect(!admits(3, 2, incumbent: true), "an incumbent needs a lead of two")
        #expect(admits(4, 2, incumbent: true))
        #expect(!admits(1, 9, incumbent: true, idle: 300))
        #expect(admits(1, 9, incumbent: true, idle: 301), "an idle victim loses to anything seen")
        #expect(!admits(0, 0, idle: 301))
    }

    @Test func windowHitsAreNotCountedAndMainHitsMakeIncumbents() throws {
        let capacity = 100
        var index = EvictionIndex<StableKey, Int>(policy: .wTinyLFU, capacity: capacity)
        index.upsert(7, forKey: 7)
        let hash = FrequencySketch.spread(StableKey(7).hashValue)
        for _ in 0..<5 { _ = index.access(7) }
        #expect(index.admission.sketch.frequency(hash) == 1, "the insert counts, window hits do not")
        // The window holds 1 entry: the next key pushes 7 to probation, where a hit counts.
        index.upsert(8, forKey: 8)
        let slot = try #require(index.slot(for: 7, hash: StableKey(7).hashValue))
        #expect(index.entries[Int(slot)].list == EvictionIndex<StableKey, Int>.probationRegion)
        #expect(index.entries[Int(slot)].stamp & AdmissionState.incumbentBit == 0)
        _ = index.access(7)
        #expect(index.admission.sketch.frequency(hash) == 2)
        let moved = try #require(index.slot(for: 7, hash: StableKey(7).hashValue))
        #expect(index.entries[Int(moved)].list == EvictionIndex<StableKey, Int>.protectedRegion)
        #expect(index.entries[Int(moved)].stamp & AdmissionState.incumbentBit != 0)
        index.checkInvariants()
    }

    @Test func aVictimIdleForThirtyTimesTheCapacityLosesItsDuel() {
        // Nine keys used often fill main; a tenth stays in the window (of one entry) and is read on
        // and on, which window hits do not count.
        let capacity = 10
        var index = EvictionIndex<StableKey, Int>(policy: .wTinyLFU, capacity: capacity)
        for key in 0..<9 { index.upsert(key, forKey: key) }
        for _ in 0..<12 { for key in 0..<9 { _ = index.access(key) } }
        index.upsert(100, forKey: 100)
        #expect(index.admission.windowCount == 1 && index.count == capacity)
        for _ in 0..<250 { _ = index.access(100) }
        // The candidate (seen once) meets a main victim used a dozen times: the candidate goes.
        #expect(index.victim?.key == 100)
        for _ in 0..<60 { _ = index.access(100) }
        // Main has now been idle for more than 30 × 10 requests: its victim goes instead.
        #expect(index.victim?.key != 100)
        let evicted = index.popVictim()?.key
        #expect(evicted != 100 && evicted.map { $0.raw < 9 } == true)
        #expect(index.contains(100))
        index.upsert(101, forKey: 101)
        #expect(index.count == capacity)
        index.checkInvariants()
    }

    @Test func theSketchHasAFloorAndGrowsToTheCapacity() {
        var small = EvictionIndex<StableKey, Int>(policy: .wTinyLFU, capacity: 100)
        #expect(small.admission.sketch.table.isEmpty, "nothing is allocated before the first entry")
        small.upsert(1, forKey: 1)
        #expect(small.admission.sketch.table.count == 4_096)
        var large = EvictionIndex<StableKey, Int>(policy: .wTinyLFU, capacity: 10_000)
        for key in 0..<4_096 { large.upsert(key, forKey: key) }
        #expect(large.admission.sketch.table.count == 4_096)
        for key in 4_096..<10_000 { large.upsert(key, forKey: key) }
        #expect(large.admission.sketch.table.count == 16_384)
        for key in 10_000..<11_000 {
            _ = large.popVictim()
            large.upsert(key, forKey: key)
        }
        #expect(large.admission.sketch.table.count == 16_384, "no larger than the capacity needs")
        large.checkInvariants()
    }

    @Test func theSketchRemembersLongerWhileTheWindowIsSmall() {
        let capacity = 1_000
        var state = AdmissionState(capacity: capacity)
        #expect(state.windowTarget == 10 && state.protectedTarget == 792)
        #expect(state.sketch.resetPeriod == 30 * capacity)
        state.setWindowSize(50)
        #expect(state.sketch.resetPeriod == 23_511, "5 %: 23.5 increments per entry")
        state.setWindowSize(200)
        #expect(state.sketch.resetPeriod == 12_134, "20 %: 12.1")
        state.setWindowSize(300)
        #expect(state.sketch.resetPeriod == 10 * capacity)
        state.setWindowSize(5_000)
        #expect(state.windowTarget == capacity && state.protectedTarget == 0 && state.windowSize == 1_000)
        // A shorter period with more increments since the last halving: the next one halves.
        var sketch = FrequencySketch(words: 16)
        sketch.setResetPeriod(1_000)
        let hash = FrequencySketch.spread(5)
        for _ in 0..<10 { sketch.increment(hash) }
        sketch.setResetPeriod(8)
        #expect(sketch.additions == 8)
        sketch.increment(FrequencySketch.spread(6))
        #expect(sketch.frequency(hash) == 5)
        state.checkInvariants()
    }

    @Test(arguments: [1, 2, 3, 64, 100])
    func tinyIndexesWork(capacity: Int) {
        var index = EvictionIndex<StableKey, Int>(policy: .wTinyLFU, capacity: capacity)
        var generator = SplitMix64(seed: UInt64(capacity))
        var hits = 0
        for _ in 0..<20_000 {
            if request(&index, Int(generator.next() % UInt64(3 * capacity)), capacity: capacity) { hits += 1 }
            #expect(index.count <= capacity)
        }
        #expect(hits > 0)
        #expect(index.admission.windowTarget >= 1 && index.admission.windowTarget <= capacity)
        index.checkInvariants()
    }
}
