/// W-TinyLFU's climber: five miniature indexes with fixed windows (the *experts*), simulated on a
/// sample of the keys, and the paired test that moves the index's window towards the best of them.
///
/// Sampling is spatial, as in SHARDS (Waldspurger et al., FAST 2015): a key is sampled when bits 24
/// and up of its spread hash, as many as the sampling shift `s`, are 0, so 1 key in 2^s is; each
/// expert holds `capacity >> s` entries, so on the sampled keys it hits about as often as a full-size
/// index of its configuration would. Every sampled request goes to every expert after the index has
/// served it.
///
/// The experts' windows are 1 entry, 5 %, 20 % and 100 % (a plain LRU), and a 30 % window in front of
/// an SLRU that admits every candidate. Every 256 sampled requests, once the index is full, the best
/// expert (by hits, decayed) is compared with the expert nearest to the index's configuration on
/// the requests where exactly one of them hit: a sign test, whose variance is the number of such
/// requests whatever the hit rate is, so the workload's drift cancels out. The window moves towards
/// the best one's (by at most ×2) when it leads by two standard deviations, by at least 32 of those
/// requests and by 1 % of hits; when the nearest expert is the best, ahead of every other, the window
/// moves towards it.
///
/// Why experts rather than hill climbing or a single sampled LRU, and what the alternatives lost on
/// the real traces: Documentation/Decisions/0001-adaptive-eviction.md.
///
/// Not thread-safe: its owner holds a lock around every call.
@usableFromInline
struct WindowExperts {
    /// The experts' window shares (0: one entry) and whether each admits every candidate.
    static let configurations: [(windowShare: Double, admitsAll: Bool)] = [
        (0, false), (0.05, false), (0.2, false), (1, false), (0.3, true),
    ]
    /// The number of experts.
    @usableFromInline static var expertCount: Int { 5 }
    /// Sampled requests per decision; 128 or 64 let loops move the window (`loop` at 256 entries lost
    /// 2.4 points).
    static var period: Int { 256 }
    /// How much of the evidence each period keeps.
    static var decay: Double { 0.95 }
    /// The lead, in standard deviations of the paired test, that moves the window.
    static var significance: Double { 2 }
    /// The fewest (decayed) requests where exactly one of the two experts hit before a move: at the
    /// first decision after the cache fills, LRU led by 1.6 % on `multi2` at 1 000 entries with one
    /// hash seed, and the window that followed cost 1.6 points.
    static var minimumDisagreements: Double { 32 }
    /// The best expert's least lead in hits: 1 % took `sprite` at 1 000 and 1 500 entries from −1.3 to
    /// −0.7 points; 2–4 % lost on `oltp` at 15 000.
    static var minimumGain: Double { 0.01 }
    /// The most the window grows or shrinks per decision: one period's burst must not tear main down
    /// (a loop moved an unlimited window to 100 % in 8 requests).
    static var maximumFactor: Double { 2 }

    /// Which bits of a spread hash (shifted right by 24) must be 0 for the key to be sampled.
    @usableFromInline let sampleMask: UInt64
    /// 1 when there are no experts (no key is sampled), else 0.
    @usableFromInline let samplesNone: UInt64
    /// The experts, ``expertCount`` of them (none for an index that does not use them).
    @usableFromInline var experts: [SimulatedPolicy]
    /// Each expert's window, in entries at the index's scale.
    @usableFromInline let windowSizes: [Double]
    /// Each expert's hits, decayed.
    @usableFromInline var scores: [Double]
    /// For experts a < b, at `a * expertCount + b`: the requests where only b hit minus those where
    /// only a hit, decayed.
    @usableFromInline var disagreements: [Double]
    /// For experts a < b: the requests where exactly one of them hit, decayed.
    @usableFromInline var disagreementCounts: [Double]
    /// Sampled requests in the current period.
    @usableFromInline var periodRequests = 0
    /// Sampled requests served while the index was full: no decision before one period of them.
    @usableFromInline var requestsWhileFull = 0
    /// Decisions taken, and those that moved to another expert; for tests.
    @usableFromInline var decisions = 0
    @usableFromInline var moves = 0

    /// Creates the experts for an index of `capacity` entries.
    ///
    /// The sampling shift is the smallest that keeps the experts at most max(512, capacity / 32)
    /// entries: 512 alone let a cold sliding trace of 1 M entries lose 15.6 points, the window
    /// reaching LRU too slowly. At least half the keys are left out while the experts keep 32
    /// entries or more, and at most 32 768 (`SimulatedPolicy.largestCapacity`, an index of a million
    /// entries or more).
    ///
    /// A `compact` index's experts keep at most max(512, capacity / 64) entries: 2 bytes per entry
    /// of the index rather than 4, for a window that moves after twice as many requests.
    init(capacity: Int, compact: Bool = false) {
        let limit = max(512, Double(capacity) / (compact ? 64 : 32))
        var shift = 0
        while Double(capacity >> shift) > limit { shift += 1 }
        while shift < 1 && capacity >> (shift + 1) >= 32 { shift += 1 }
        while capacity >> shift > SimulatedPolicy.largestCapacity { shift += 1 }
        sampleMask = shift >= 64 ? .max : (1 << UInt64(shift)) - 1
        samplesNone = 0
        let size = max(1, capacity >> shift)
        experts = Self.configurations.map {
            SimulatedPolicy(capacity: size, windowShare: $0.windowShare, admitsAll: $0.admitsAll)
        }
        windowSizes = Self.configurations.map { max(1, $0.windowShare * Double(capacity)) }
        scores = Array(repeating: 0, count: Self.expertCount)
        disagreements = Array(repeating: 0, count: Self.expertCount * Self.expertCount)
        disagreementCounts = disagreements
    }

    private init() {
        sampleMask = .max
        samplesNone = 1
        experts = []
        windowSizes = []
        scores = []
        disagreements = []
        disagreementCounts = []
    }

    /// The experts of an index that does not use them or follows another's climber: allocates
    /// nothing, samples nothing.
    static var unused: WindowExperts { WindowExperts() }

    /// Gives every expert its own buffers if a copy shares them (see `SimulatedPolicy.makeUnique()`).
    ///
    /// - Complexity: O(the experts' entries) when they are shared, O(experts) otherwise.
    @usableFromInline
    mutating func makeUnique() {
        for expert in experts.indices { experts[expert].makeUnique() }
    }

    /// Whether there are experts.
    var isActive: Bool { samplesNone == 0 }

    /// Whether the key of spread hash `hash` is sampled.
    @inlinable
    func samples(_ hash: UInt64) -> Bool { (hash >> 24 | samplesNone) & sampleMask == 0 }

    /// Feeds a sampled request to every expert and counts who hit; every ``period`` requests decides
    /// whether the window moves.
    ///
    /// - Parameters:
    ///   - hash: The key's spread hash.
    ///   - isFull: Whether the index is full.
    ///   - windowSize: The index's window, in entries.
    ///   - admitsAll: Whether the index admits every candidate.
    /// - Returns: The index's new window and admission mode, or `nil` when they stay.
    @usableFromInline
    mutating func observe(
        _ hash: UInt64,
        isFull: Bool,
        windowSize: Double,
        admitsAll: Bool
    ) -> (windowSize: Double, admitsAll: Bool)? {
        var hits: UInt8 = 0
        for expert in 0..<Self.expertCount where experts[expert].access(hash) {
            hits |= 1 << UInt8(expert)
            scores[expert] += 1
        }
        if hits != 0 && hits != (1 << UInt8(Self.expertCount)) - 1 {
            for a in 0..<Self.expertCount - 1 {
                for b in a + 1..<Self.expertCount where (hits >> UInt8(a)) & 1 != (hits >> UInt8(b)) & 1 {
                    disagreements[a * Self.expertCount + b] += (hits >> UInt8(b)) & 1 == 1 ? 1 : -1
                    disagreementCounts[a * Self.expertCount + b] += 1
                }
            }
        }
        if isFull { requestsWhileFull += 1 }
        periodRequests += 1
        guard periodRequests >= Self.period else { return nil }
        periodRequests = 0
        let decision = requestsWhileFull >= Self.period ? decide(windowSize: windowSize, admitsAll: admitsAll) : nil
        for index in scores.indices { scores[index] *= Self.decay }
        for index in disagreements.indices {
            disagreements[index] *= Self.decay
            disagreementCounts[index] *= Self.decay
        }
        return decision
    }

    /// Compares the best expert with the one nearest to the index's configuration.
    func decideWindow(windowSize: Double, admitsAll: Bool) -> (windowSize: Double, admitsAll: Bool, moved: Bool)? {
        var best = 0
        for expert in 1..<Self.expertCount where scores[expert] > scores[best] { best = expert }
        var current = -1
        for expert in 0..<Self.expertCount where Self.configurations[expert].admitsAll == admitsAll {
            if current < 0
                || Self.logDistance(windowSizes[expert], windowSize)
                    < Self.logDistance(windowSizes[current], windowSize)
            {
                current = expert
            }
        }
        var moves = false
        if best != current {
            let (low, high) = (min(best, current), max(best, current))
            let lead = disagreements[low * Self.expertCount + high] * (best > current ? 1 : -1)
            let count = disagreementCounts[low * Self.expertCount + high]
            moves =
                count >= Self.minimumDisagreements && lead > Self.significance * count.squareRoot()
                && scores[best] > (1 + Self.minimumGain) * scores[current]
        }
        // Following the nearest expert needs no paired test, but it must be ahead of every other
        // one: when they tie (a scan that none of them hits), `best` is only the first of them, and
        // the window walked towards one entry on no evidence, then took as many decisions to come back.
        let leadsAlone = scores.indices.allSatisfy { $0 == best || scores[$0] < scores[best] }
        guard moves || (best == current && leadsAlone) else { return nil }
        let factor = min(max(windowSizes[best] / windowSize, 1 / Self.maximumFactor), Self.maximumFactor)
        return (
            windowSize * factor,
            moves ? Self.configurations[best].admitsAll : admitsAll,
            moves
        )
    }

    /// Takes a decision and counts it.
    mutating func decide(windowSize: Double, admitsAll: Bool) -> (windowSize: Double, admitsAll: Bool)? {
        decisions += 1
        guard let decision = decideWindow(windowSize: windowSize, admitsAll: admitsAll) else { return nil }
        if decision.moved { self.moves += 1 }
        return (decision.windowSize, decision.admitsAll)
    }

    /// How far apart two window sizes are: the ratio of the larger to the smaller, which orders
    /// pairs as the distance of their logarithms does.
    static func logDistance(_ first: Double, _ second: Double) -> Double {
        max(first / second, second / first)
    }
}
