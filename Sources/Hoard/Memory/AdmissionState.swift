import Foundation

/// What W-TinyLFU keeps besides the links: the region sizes and their targets, the frequency sketch,
/// the request clock, and the experts that size the window.
///
/// The rules here are shared by the index and by its experts (`SimulatedPolicy`), which are miniature
/// copies of it: the duel between the window's candidate and main's victim
/// (``admits(candidateFrequency:victimFrequency:victimIsIncumbent:victimIdleTime:idleThreshold:)``),
/// the region targets a window size gives (``targets(windowSize:capacity:)``) and the sketch's
/// memory that follows the window (``resetPeriod(windowTarget:capacity:)``).
@usableFromInline
struct AdmissionState {
    /// How often each key was used lately: probation and protected hits and new entries count,
    /// window hits do not.
    @usableFromInline var sketch: FrequencySketch
    /// The number of entries in the window region.
    @usableFromInline var windowCount = 0
    /// The number of entries in the protected region.
    @usableFromInline var protectedCount = 0
    /// The index's count limit, at least 1: the region targets are shares of it.
    @usableFromInline let capacity: Int
    /// The window's size in entries as the climber sets it, from 1 to `capacity`.
    @usableFromInline private(set) var windowSize: Double
    /// The window's size in entries: `windowSize` rounded.
    @usableFromInline private(set) var windowTarget: Int
    /// The most entries of the protected region: 80 % of the rest.
    @usableFromInline private(set) var protectedTarget: Int
    /// Whether every candidate is admitted (an SLRU with a window), as the SLRU expert does; the
    /// duel and the sketch are then not read.
    @usableFromInline private(set) var admitsAll = false
    /// The request clock, +1 on every hit and every new entry; 30 bits, and it wraps.
    ///
    /// `Entry.stamp` holds each entry's last request below its incumbent and referenced bits, so
    /// ``idleTime(since:)`` tells how long the entry has been idle.
    @usableFromInline var now: UInt32 = 0
    /// A main victim idle for longer than this (30 × `capacity` requests) loses its duel to any
    /// candidate seen at least once.
    @usableFromInline let idleThreshold: UInt32
    /// The experts and the climber that follows them.
    @usableFromInline var experts: WindowExperts

    /// The bit of `Entry.stamp` that marks an incumbent.
    ///
    /// An incumbent is an entry hit while in probation or protected since it was stored.
    @usableFromInline static var incumbentBit: UInt32 { 1 << 31 }
    /// The bit of a protected entry's `Entry.stamp` that says it was hit since it last moved.
    ///
    /// A hit in protected sets it instead of moving the entry to the region's newest end; the
    /// entry's second chance comes when it reaches the oldest end (see
    /// `EvictionIndex.demoteProtectedHead()`). No entry outside protected has it.
    @usableFromInline static var referencedBit: UInt32 { 1 << 30 }
    /// The clock's bits in a stamp: the other 30.
    @usableFromInline static var clockMask: UInt32 { referencedBit - 1 }

    /// Where the counters of the key of spread hash `hash` are in the sketch, and the smallest of
    /// them; 15 (no increment) while the sketch has no table.
    @inlinable @inline(__always)
    func sketchCounters(_ hash: UInt64) -> (positions: FrequencySketch.Positions, smallest: UInt64) {
        let positions = sketch.positions(hash)
        return (positions, sketch.table.isEmpty ? 15 : sketch.smallestCounter(at: positions))
    }

    /// Gives the sketch and the experts their own buffers if a copy shares them (see
    /// `EvictionIndex.makeUnique()`).
    ///
    /// - Complexity: O(sketch size + the experts' entries) when they are shared, O(1) otherwise.
    @usableFromInline
    mutating func makeUnique() {
        sketch.makeUnique()
        experts.makeUnique()
    }

    /// Advances the request clock; returns the new time.
    @inlinable
    mutating func tick() -> UInt32 {
        now = (now &+ 1) & Self.clockMask
        return now
    }

    /// The requests since the one that wrote `stamp`.
    @inlinable
    func idleTime(since stamp: UInt32) -> UInt32 { (now &- stamp) & Self.clockMask }

    /// The protected region's share of the main region.
    @usableFromInline static var protectedShare: Double { 0.8 }
    /// The window's size at the start, as a share of the capacity.
    ///
    /// Small: a large starting window fills main with the wrong entries on loops (Decisions/0011).
    @usableFromInline static var initialWindowShare: Double { 0.01 }
    /// Requests per entry after which a victim that was not requested counts as idle.
    ///
    /// It must be at least the sketch's longest memory (30 increments per entry), or a long loop's
    /// entries are judged idle between two passes (Decisions/0011).
    @usableFromInline static var idleRequestsPerEntry: Int { 30 }
    /// The fewest words of the index's sketch (32 KiB).
    ///
    /// Small levels see, on loop-shaped traces, up to 30 × the capacity distinct keys per sketch
    /// period, and collisions then decide the duels; smaller floors lost points on real traces
    /// (Decisions/0011).
    @usableFromInline static var minimumSketchWords: Int { 4_096 }

    /// Creates the state for an index of at most `capacity` entries.
    ///
    /// - Parameters:
    ///   - capacity: The index's count limit.
    ///   - runsClimber: Whether the index sizes its window with experts of its own; without, it keeps
    ///     the window it is given (``adoptWindow(share:admitsAll:)``), as the shards of a sharded
    ///     memory store but the first do (see `MemoryStore`).
    ///   - compact: Whether the index trades a little hit rate for memory (the disk store's; see
    ///     `DiskEntryIndex`): two entries share each 64-bit word of the sketch (16 counters) once it
    ///     is full size, where Caffeine gives each its own, and the experts sample half as many keys
    ///     (see `WindowExperts.init(capacity:compact:)`).
    @usableFromInline
    init(capacity: Int, runsClimber: Bool = true, compact: Bool = false) {
        let capacity = max(1, capacity)
        self.capacity = capacity
        sketch = FrequencySketch(
            maximumCapacity: compact ? max(1, capacity / 2) : capacity,
            minimumSize: Self.minimumSketchWords
        )
        let (idle, overflow) = capacity.multipliedReportingOverflow(by: Self.idleRequestsPerEntry)
        idleThreshold = UInt32(clamping: min(overflow ? Int.max : idle, Int(Self.clockMask)))
        experts = runsClimber ? WindowExperts(capacity: capacity, compact: compact) : .unused
        windowSize = 1
        windowTarget = 1
        protectedTarget = 0
        setWindowSize(Self.initialWindowShare * Double(capacity))
    }

    /// The state of an index under LRU or LFU, which never reads it: allocates nothing.
    @usableFromInline
    static var unused: AdmissionState {
        AdmissionState(unusedCapacity: 1)
    }

    private init(unusedCapacity capacity: Int) {
        self.capacity = capacity
        sketch = FrequencySketch(maximumCapacity: capacity)
        idleThreshold = .max
        experts = .unused
        windowSize = 1
        windowTarget = 1
        protectedTarget = 0
    }

    /// Sets the window's size in entries, and with it the region targets and the sketch's period.
    ///
    /// The size is clamped to 1 through `capacity`.
    @usableFromInline
    mutating func setWindowSize(_ size: Double) {
        windowSize = min(max(size, 1), Double(capacity))
        (windowTarget, protectedTarget) = Self.targets(windowSize: windowSize, capacity: capacity)
        sketch.setResetPeriod(Self.resetPeriod(windowTarget: windowTarget, capacity: capacity))
    }

    /// The window's size as a share of the capacity, and whether every candidate is admitted: what
    /// another index of the same workload adopts (``adoptWindow(share:admitsAll:)``).
    var window: (share: Double, admitsAll: Bool) { (windowSize / Double(capacity), admitsAll) }

    /// Takes the window share and admission mode that another index's climber chose.
    mutating func adoptWindow(share: Double, admitsAll: Bool) {
        self.admitsAll = admitsAll
        setWindowSize(share * Double(capacity))
    }

    /// Feeds a sampled request to the experts, after the index has served it; moves the window if
    /// the climber decides so.
    ///
    /// - Parameters:
    ///   - hash: The key's spread hash; the key must be sampled (`WindowExperts.samples(_:)`).
    ///   - isFull: Whether the index holds `capacity` entries or more.
    @usableFromInline
    mutating func observe(_ hash: UInt64, isFull: Bool) {
        guard let decision = experts.observe(hash, isFull: isFull, windowSize: windowSize, admitsAll: admitsAll)
        else { return }
        admitsAll = decision.admitsAll
        setWindowSize(decision.windowSize)
    }

    // MARK: - The rules the index and its experts share

    /// The window's and the protected region's targets, in entries, for a window of `windowSize`
    /// entries in an index of `capacity`.
    @inlinable
    static func targets(windowSize: Double, capacity: Int) -> (window: Int, protected: Int) {
        let window = min(max(Int(windowSize + 0.5), 1), capacity)
        return (window, Int(Double(capacity - window) * protectedShare))
    }

    /// The sketch's increments between two halvings for a window of `windowTarget` entries in an
    /// index of `capacity`.
    ///
    /// 30 per entry while the window is at most 3 % (frequency mode), 10 once it is 30 % or more
    /// (recency mode), and log–log in between (5 % → 23.5, 20 % → 12.2). Loops and small caches need
    /// the long memory (10 took `cs` at 100 entries from 5.7 % to 1.6 %), recency phases the short one
    /// (30 at a 1 % window: `shifting` at 10 000 entries 56.8 % instead of 65.3 %).
    static func resetPeriod(windowTarget: Int, capacity: Int) -> Int {
        let share = Double(windowTarget) / Double(capacity)
        let perEntry: Double
        if share <= 0.03 {
            perEntry = 30
        } else if share >= 0.3 {
            perEntry = 10
        } else {
            perEntry = exp(log(30.0) + (log(share) - log(0.03)) / (log(0.3) - log(0.03)) * (log(10.0) - log(30.0)))
        }
        let period = perEntry * Double(max(capacity, 16))
        return period >= Double(Int.max / 2) ? Int.max / 2 : Int(period)
    }

    /// Whether the window's oldest entry (the candidate) replaces main's victim.
    ///
    /// A victim idle for longer than `idleThreshold` requests loses to any candidate seen at least
    /// once: its count may be stale. Otherwise the candidate must be used more often than the
    /// victim; a victim that was hit while in main (an *incumbent*) needs it to be used more often
    /// by two. Ties keep the victim.
    ///
    /// The margin only for incumbents keeps the gain on loops nearly for free, where a margin for
    /// every victim cost most traces; admitting ties lets loops collapse (Decisions/0011).
    @inlinable
    static func admits(
        candidateFrequency: Int,
        victimFrequency: Int,
        victimIsIncumbent: Bool,
        victimIdleTime: UInt32,
        idleThreshold: UInt32
    ) -> Bool {
        if victimIdleTime > idleThreshold && candidateFrequency >= 1 { return true }
        return candidateFrequency > victimFrequency + (victimIsIncumbent ? 1 : 0)
    }
}
