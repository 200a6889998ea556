/// Which entry a full cache level removes to make room.
///
/// Both policies are O(1) per operation.
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

    /// `"lfu"` or `"lru"`.
    public var description: String {
        switch self {
        case .lfu: "lfu"
        case .lru: "lru"
        }
    }
}
