/// Which entry a full cache level removes to make room.
///
/// Every policy is O(1) per operation (amortised for `.lfu` and `.wTinyLFU`).
///
/// New cases may be added in a minor release: a `switch` over it needs an `@unknown default` case.
public enum EvictionPolicy: Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Least frequently used: removes the entry with the fewest accesses and, among equals, the least
    /// recently used one.
    ///
    /// Counts age so that yesterday's popular keys cannot squat forever: every `agingPeriod`
    /// accesses and inserts (ten times the level's capacity, at least 1 024), every count `c` becomes
    /// `(c + 1) / 2`. Entries whose counts become equal keep their recency order. Between two agings
    /// the order is exact LFU.
    case lfu
    /// Least recently used: removes the entry that was set or read the longest time ago.
    case lru
    /// Window TinyLFU with an adaptive window: recency for newcomers, frequency for admission.
    ///
    /// The entries live in three least-recently-used lists: a small *window* that every new entry
    /// enters, and a main region split into *probation* and *protected* (80 % of the main region). A
    /// read of a probation entry promotes it to protected; protected's oldest entry falls back to
    /// probation. How often each key was used lately, stored or not, is estimated by a count-min sketch
    /// of 4-bit counters (about 8 bytes per entry) that halves every thirty accesses per entry, so
    /// old popularity fades.
    ///
    /// When the level is full and the window holds its share, the window's oldest entry (the
    /// candidate) meets the main region's next victim (probation's oldest, else protected's): the
    /// candidate is admitted, and the victim removed, only if its estimated frequency is higher;
    /// otherwise the candidate is removed. A
    /// burst of keys used once therefore passes through the window without flushing the entries
    /// that are used often. The entry being set always stays.
    ///
    /// The window's share is *adaptive*: it starts at 1 % of the entries and may grow to all of
    /// them (pure LRU). After every sample of requests (hits and new entries, as many as the level
    /// holds, at least 512) the climber compares the level with a plain LRU of the same size,
    /// simulated on a sample of the keys (at most 1 024 of them, about 32 KiB): if the LRU hit more
    /// often, the share grows by 10 % of the entries, otherwise it shrinks by as much. A workload
    /// whose hot set keeps moving, where recency beats stale frequencies, grows the window towards
    /// LRU; a stable skewed one, or a scan, keeps it at 1 %, and brings it back there after a phase
    /// that grew it.
    ///
    /// - Complexity: O(1) amortised per access, set and eviction (halving the sketch and growing it
    ///   are O(capacity) once per O(capacity) operations).
    case wTinyLFU

    /// `"lfu"`, `"lru"` or `"w-tinylfu"`.
    public var description: String {
        switch self {
        case .lfu: "lfu"
        case .lru: "lru"
        case .wTinyLFU: "w-tinylfu"
        }
    }
}
