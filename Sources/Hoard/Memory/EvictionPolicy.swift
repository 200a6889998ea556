/// Which entry a full cache level removes to make room.
///
/// Every policy is O(1) per operation (amortised for `.lfu` and `.wTinyLFU`).
///
/// A struct with static members rather than an enum, so that a minor release can add a policy without
/// breaking a client's `switch`: compare policies with `==`, or switch with a `default` case.
public struct EvictionPolicy: Sendable, Hashable, CustomStringConvertible {
    /// The policies this version knows, as a closed set for the implementation.
    @usableFromInline
    enum Kind: Sendable, Hashable, CaseIterable {
        case lfu, lru, wTinyLFU
    }

    @usableFromInline let kind: Kind

    @inlinable
    init(_ kind: Kind) { self.kind = kind }

    /// Every policy this version of Hoard offers (a later version may offer more).
    public static var allCases: [EvictionPolicy] { Kind.allCases.map(EvictionPolicy.init) }

    /// Least frequently used: removes the entry with the fewest accesses and, among equals, the least
    /// recently used one.
    ///
    /// Counts age so that yesterday's popular keys cannot squat forever: every `agingPeriod`
    /// accesses and inserts (ten times the level's capacity, at least 1 024), every count `c` becomes
    /// `(c + 1) / 2`. Entries whose counts become equal keep their recency order. Between two agings
    /// the order is exact LFU.
    @inlinable public static var lfu: EvictionPolicy { EvictionPolicy(.lfu) }
    /// Least recently used: removes the entry that was set or read the longest time ago.
    @inlinable public static var lru: EvictionPolicy { EvictionPolicy(.lru) }
    /// Window TinyLFU with an adaptive window: recency for newcomers, frequency for admission, and
    /// a window sized by what would have hit on this workload.
    ///
    /// The entries live in three least-recently-used lists: a *window* that every new entry enters,
    /// and a main region split into *probation* and *protected* (80 % of the main region). A read of
    /// a probation entry promotes it to protected; protected's oldest entry falls back to probation.
    /// How often each key was used lately, stored or not, is estimated by a count-min sketch of 4-bit
    /// counters (8 bytes per entry, at least 32 KiB) that halves periodically, so old popularity
    /// fades: every 30 increments per entry while the window is small, every 10 once it is large.
    /// Reads of window entries are not counted: repeated reads of a new entry in quick succession
    /// say little about whether it will be used again.
    ///
    /// When the level is full and the window holds its share, the window's oldest entry (the
    /// candidate) meets the main region's next victim (probation's oldest, else protected's): the
    /// candidate is admitted, and the victim removed, only if its estimated frequency is higher, by
    /// two if the victim was read while in the main region; otherwise the candidate is removed. A
    /// victim not read for 30 × the capacity requests loses to any candidate. A burst of keys used
    /// once therefore passes through the window without flushing the entries that are used often.
    /// The entry being set always stays.
    ///
    /// The window's share is *adaptive*. Five small simulations of the level with fixed windows (one
    /// entry, 5 %, 20 %, 100 % — plain LRU — and a 30 % window that admits every candidate) run on a
    /// sample of the keys. Every 256 sampled requests the window moves towards the best of them (by
    /// at most ×2) when it beats the one nearest to the level's own window on the same requests by a
    /// significant margin. It starts at 1 %. A stable skewed workload, or one with scans or loops,
    /// keeps a small window; a workload whose hot set keeps moving grows it towards LRU; and a
    /// workload in between finds the window in between.
    ///
    /// - Complexity: O(1) per access, set and eviction: at most a few list moves each, and the
    ///   sampled requests' simulations are O(1) too (halving the sketch and growing it are
    ///   O(capacity) once per O(capacity) operations).
    @inlinable public static var wTinyLFU: EvictionPolicy { EvictionPolicy(.wTinyLFU) }

    /// `"lfu"`, `"lru"` or `"w-tinylfu"`.
    public var description: String {
        switch kind {
        case .lfu: "lfu"
        case .lru: "lru"
        case .wTinyLFU: "w-tinylfu"
        }
    }
}
