import HoardTestSupport
import Testing

@testable import Hoard

/// The climber's experts: their sampling and sizes, each expert's rules, the paired test that moves
/// the window, and that hits of keys out of the sample never reach them.
@Suite struct WindowExpertsTests {
    @Test(arguments: [
        (10, 10), (63, 63), (64, 32), (100, 50), (1_000, 500), (10_000, 312), (62_500, 1_953), (1 << 24, 32_768),
    ])
    func theSampleKeepsTheExpertsSmall(capacity: Int, expertCapacity: Int) {
        let experts = WindowExperts(capacity: capacity)
        #expect(experts.experts.count == 5)
        #expect(experts.experts.allSatisfy { $0.capacity == expertCapacity })
        // One key in 2^s is sampled, and each expert holds capacity >> s entries.
        #expect(Int(experts.sampleMask + 1) * expertCapacity <= capacity)
        #expect(Int(experts.sampleMask + 1) * (expertCapacity + 1) > capacity)
        #expect(experts.windowSizes == [0, 0.05, 0.2, 1, 0.3].map { max(1, $0 * Double(capacity)) })
    }

    /// A compact index (the disk store's) keeps half the sketch and experts half the size, once its
    /// capacity is large enough for either to be over its floor.
    @Test(arguments: [(1_000, 4_096, 500, 4_096), (1_000_000, 1 << 20, 31_250, 1 << 19)])
    func aCompactIndexKeepsHalfTheSketchAndExpertsHalfTheSize(
        capacity: Int,
        sketchWords: Int,
        expertCapacity: Int,
        compactSketchWords: Int
    ) {
        let standard = AdmissionState(capacity: capacity)
        let compact = AdmissionState(capacity: capacity, compact: true)
        #expect(standard.sketch.maximumSize == sketchWords)
        #expect(compact.sketch.maximumSize == compactSketchWords)
        #expect(standard.experts.experts.allSatisfy { $0.capacity == expertCapacity })
        let compactExpertCapacity = capacity >= 64 * 512 ? expertCapacity / 2 : expertCapacity
        #expect(compact.experts.experts.allSatisfy { $0.capacity == compactExpertCapacity })
    }

    @Test func theLRUExpertIsAnLRUOfTheHashes() {
        var expert = SimulatedPolicy(capacity: 3, windowShare: 1, admitsAll: false)
        #expect(!expert.hasSketch && expert.windowTarget == 3)
        // 4 evicts 2, the least recently used; then 2 evicts 3.
        let hits = [1, 2, 3, 1, 4, 2, 1, 4].map { expert.access(UInt64($0) << 40) }
        #expect(hits == [false, false, false, true, false, false, true, true])
        expert.checkInvariants()
    }

    @Test func theSLRUExpertAdmitsEveryCandidateAndTheOthersDuel() {
        var slru = SimulatedPolicy(capacity: 100, windowShare: 0.3, admitsAll: true)
        var duel = SimulatedPolicy(capacity: 100, windowShare: 0.05, admitsAll: false)
        #expect(!slru.hasSketch && duel.hasSketch)
        // As many hot keys as the experts hold: they are full when the scan starts.
        let hot = (0..<100).map { FrequencySketch.spread($0) }
        for _ in 0..<10 { for hash in hot { _ = slru.access(hash) } }
        for _ in 0..<10 { for hash in hot { _ = duel.access(hash) } }
        let scan = (1_000..<1_500).map { FrequencySketch.spread($0) }
        for hash in scan {
            _ = slru.access(hash)
            _ = duel.access(hash)
        }
        /// How many keys of the scan made it past the window.
        func admitted(_ expert: SimulatedPolicy) -> Int {
            scan.filter { hash in
                let node = expert.find(hash)
                return node != SimulatedPolicy.none && expert.flags[Int(node)] & 3 != SimulatedPolicy.window
            }.count
        }
        #expect(admitted(slru) > 0)
        #expect(admitted(duel) == 0)
        #expect(hot.filter { duel.find($0) != SimulatedPolicy.none }.count >= 90)
        slru.checkInvariants()
        duel.checkInvariants()
    }

    /// An expert's buffers do not copy on write by themselves: a copy made unique must leave the
    /// original as it was, whatever the copy is then fed.
    @Test func aCopyMadeUniqueLeavesTheOriginalExpertAlone() {
        var original = SimulatedPolicy(capacity: 8, windowShare: 0.2, admitsAll: false)
        for key in 0..<20 { _ = original.access(FrequencySketch.spread(key % 12)) }
        func state(_ expert: SimulatedPolicy) -> [String] {
            [
                "\(expert.now) \(expert.count) \(expert.freeList)", "\(Array(expert.cells))", "\(Array(expert.flags))",
                "\(expert.nodes.map { "\($0.hash) \($0.stamp) \($0.prev) \($0.next)" })",
                "\(expert.regions.map { "\($0.head) \($0.tail) \($0.count)" })", "\(Array(expert.sketch.table))",
            ]
        }
        let before = state(original)
        var copy = original
        copy.makeUnique()
        for key in 100..<140 { _ = copy.access(FrequencySketch.spread(key)) }
        #expect(state(original) == before)
        #expect(state(copy) != before)
        original.checkInvariants()
        copy.checkInvariants()
    }

    @Test(arguments: WindowExperts.configurations.indices)
    func everyExpertKeepsItsLimitsAndInvariants(configuration: Int) {
        let (share, admitsAll) = WindowExperts.configurations[configuration]
        for capacity in [1, 2, 5, 50, 300] {
            var expert = SimulatedPolicy(capacity: capacity, windowShare: share, admitsAll: admitsAll)
            var generator = SplitMix64(seed: UInt64(capacity * 10 + configuration))
            var hits = 0
            for step in 0..<20_000 {
                let key = generator.next() % 4 == 0 ? generator.next() % 10 : generator.next() % UInt64(4 * capacity)
                if expert.access(FrequencySketch.spread(Int(key))) { hits += 1 }
                #expect(expert.count <= capacity)
                if step % 1_999 == 0 { expert.checkInvariants() }
            }
            #expect(hits > 0)
            expert.checkInvariants()
        }
    }

    /// Experts for an index of 1 000 entries (windows 1, 50, 200, 1 000 and 300) with the given
    /// evidence.
    private func experts(scores: [Double], lead: (Int, Int, Double, Double)? = nil) -> WindowExperts {
        var experts = WindowExperts(capacity: 1_000)
        experts.scores = scores
        if let (low, high, signed, count) = lead {
            experts.disagreements[low * 5 + high] = signed
            experts.disagreementCounts[low * 5 + high] = count
        }
        return experts
    }

    @Test func theWindowMovesOnlyOnASignificantPairedLead() throws {
        // The index's window is 10 entries: the nearest expert is the 5 % one (50 entries).
        let scores: [Double] = [100, 100, 130, 90, 0]
        let moved = try #require(
            experts(scores: scores, lead: (1, 2, 40, 100)).decideWindow(windowSize: 10, admitsAll: false)
        )
        #expect(moved.windowSize == 20 && !moved.admitsAll && moved.moved, "towards 200 entries, by ×2 at most")
        // Two standard deviations of 100 paired requests are 20.
        #expect(experts(scores: scores, lead: (1, 2, 20, 100)).decideWindow(windowSize: 10, admitsAll: false) == nil)
        #expect(experts(scores: scores, lead: (1, 2, 25, 31)).decideWindow(windowSize: 10, admitsAll: false) == nil)
        // The best must also lead by 1 % of hits.
        let close: [Double] = [100, 100, 100.9, 90, 0]
        #expect(experts(scores: close, lead: (1, 2, 40, 100)).decideWindow(windowSize: 10, admitsAll: false) == nil)
        // The 1-entry expert leads the 5 % one: the lead counts from the other side of the pair.
        let small = try #require(
            experts(scores: [130, 100, 90, 90, 0], lead: (0, 1, -40, 100)).decideWindow(
                windowSize: 10,
                admitsAll: false
            )
        )
        #expect(small.windowSize == 5)
    }

    @Test func theWindowFollowsTheNearestExpertWhileItIsBest() throws {
        let scores: [Double] = [90, 130, 100, 90, 0]
        let first = try #require(experts(scores: scores).decideWindow(windowSize: 10, admitsAll: false))
        #expect(first.windowSize == 20 && !first.moved)
        let second = try #require(experts(scores: scores).decideWindow(windowSize: 40, admitsAll: false))
        #expect(second.windowSize == 50)
    }

    @Test func expertsThatTieGiveNoDirection() {
        // A 4-entry window: the nearest expert is the 1-entry one, which is also first among equals
        // when nothing tells the experts apart (a scan that none of them hits).
        #expect(experts(scores: [0, 0, 0, 0, 0]).decideWindow(windowSize: 4, admitsAll: false) == nil)
        #expect(experts(scores: [120, 120, 90, 90, 0]).decideWindow(windowSize: 4, admitsAll: false) == nil)
        // Ahead of all the others, it is followed.
        #expect(experts(scores: [121, 120, 90, 90, 0]).decideWindow(windowSize: 4, admitsAll: false)?.windowSize == 2)
    }

    @Test func aScanLeavesTheWindowWhereItWas() {
        // 400 entries: the 1 % window (4 entries) is nearer the 1-entry expert than the 5 % one. No
        // key comes back, so no expert ever hits, and there is nothing to follow.
        let capacity = 400
        var index = EvictionIndex<StableKey, Int>(policy: .wTinyLFU, capacity: capacity)
        for key in 0..<60_000 {
            #expect(index.access(StableKey(key)) == nil)
            if index.count >= capacity { _ = index.popVictim() }
            index.upsert(key, forKey: StableKey(key))
        }
        #expect(index.admission.experts.decisions > 50)
        #expect(index.admission.window.share == AdmissionState.initialWindowShare)
        #expect(index.count == capacity)
        index.checkInvariants()
    }

    @Test func theSLRUExpertSwitchesAdmissionOffAndBack() throws {
        // From a 200-entry window, the SLRU expert (300 entries, admits everything) leads the 20 % one.
        let toSLRU = try #require(
            experts(scores: [0, 0, 100, 0, 140], lead: (2, 4, 40, 100)).decideWindow(windowSize: 200, admitsAll: false)
        )
        #expect(toSLRU.admitsAll && toSLRU.windowSize == 300)
        // Admitting everything, the index's expert is the SLRU one whatever the window; the LRU expert leads.
        let toLRU = try #require(
            experts(scores: [0, 0, 0, 140, 100], lead: (3, 4, -40, 100)).decideWindow(windowSize: 300, admitsAll: true)
        )
        #expect(!toLRU.admitsAll && toLRU.windowSize == 600)
    }

    @Test func nothingIsDecidedBeforeTheIndexIsFull() {
        var experts = WindowExperts(capacity: 100)
        for key in 0..<2_000 {
            let hash = FrequencySketch.spread(key)
            guard experts.samples(hash) else { continue }
            #expect(experts.observe(hash, isFull: false, windowSize: 1, admitsAll: false) == nil)
        }
        #expect(experts.decisions == 0 && experts.requestsWhileFull == 0)
        experts.checkInvariants()
    }

    @Test func hitsOfKeysOutOfTheSampleNeverReachTheExperts() {
        // 1 key in 32 is sampled at this size.
        var index = EvictionIndex<StableKey, Int>(policy: .wTinyLFU, capacity: 100_000)
        func isSampled(_ key: Int) -> Bool {
            index.admission.experts.samples(FrequencySketch.spread(StableKey(key).hashValue))
        }
        let outside = (0..<1_000).filter { !isSampled($0) }
        let inside = (0..<1_000).filter(isSampled)
        #expect(!outside.isEmpty && !inside.isEmpty)
        let clocks = { index.admission.experts.experts.map(\.now) }
        for key in outside { index.upsert(key, forKey: key) }
        let before = clocks()
        for _ in 0..<50 { for key in outside { _ = index.access(key) } }
        #expect(clocks() == before)
        index.upsert(inside[0], forKey: inside[0])
        for _ in 0..<3 { _ = index.access(inside[0]) }
        #expect(clocks() == before.map { $0 + 4 })
        index.checkInvariants()
    }

    @Test func candidatesThatWinTheirDuelsAreEvictedAfterProbationAndRestoredInOrder() {
        let capacity = 10
        var index = EvictionIndex<StableKey, Int>(policy: .wTinyLFU, capacity: capacity)
        index.admission.setWindowSize(5)
        // Five probation entries seen once, then five window entries the sketch thinks popular.
        for key in 0..<10 { index.upsert(key, forKey: key) }
        #expect(index.admission.windowCount == 5)
        for key in 5..<10 { index.admission.sketch.raise(FrequencySketch.spread(StableKey(key).hashValue), to: 9) }
        let order = index.entriesInEvictionOrder.map(\.key)
        // The first candidate beats probation's oldest and moves behind probation's own entries; the
        // window, now under its target, gives up no other until main is empty.
        #expect(order == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
        #expect(index.victim(excluding: 0) == 1)
        var restored = EvictionIndex<StableKey, Int>(policy: .wTinyLFU, capacity: capacity)
        for entry in index.entriesInEvictionOrder {
            restored.append(entry.payload, forKey: entry.key, count: entry.count)
        }
        var popped: [StableKey] = []
        while let victim = index.popVictim() {
            popped.append(victim.key)
            index.checkInvariants()
        }
        #expect(popped == order)
        #expect(restored.entriesInEvictionOrder.map(\.key) == order)
        var restoredPops: [StableKey] = []
        while let victim = restored.popVictim() { restoredPops.append(victim.key) }
        #expect(restoredPops == order)
    }

    @Test func theSameRequestsGiveTheSameOrderAndWindow() {
        let zipf = ZipfSampler(keys: 5_000, exponent: 0.8)
        var generator = SplitMix64(seed: 77)
        let trace = (0..<50_000).map { _ in zipf.next(using: &generator) }
        func run() -> (order: [StableKey], window: Int, decisions: Int) {
            var index = EvictionIndex<StableKey, Int>(policy: .wTinyLFU, capacity: 300)
            for key in trace where index.access(key) == nil {
                if index.count >= 300 { _ = index.popVictim() }
                index.upsert(key, forKey: key)
            }
            return (
                index.entriesInEvictionOrder.map(\.key), index.admission.windowTarget, index.admission.experts.decisions
            )
        }
        let first = run()
        let second = run()
        #expect(first.order == second.order && first.window == second.window)
        #expect(first.decisions > 50)
    }
}
