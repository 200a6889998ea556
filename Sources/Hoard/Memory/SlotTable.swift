/// The hash table of an eviction index: from a key's hash to the slot of its node.
///
/// Open addressing with linear probing, one `UInt64` per bucket: the low 32 bits of the key's hash
/// (its tag) above the slot number plus one; 0 is an empty bucket. Keys live only in the nodes, so
/// a bucket costs 8 bytes, a lookup compares tags before it reads a node, and growing or removing
/// never hashes a key again (the tag gives each entry's home bucket). The table stays at most
/// three-quarters full. Removal shifts the following entries back, so no tombstones build up.
///
/// Not thread-safe; not generic: the index finds keys (see `EvictionIndex.slot(for:hash:)`) and
/// keeps each node's tag.
@usableFromInline
struct SlotTable {
    @usableFromInline var buckets: [UInt64]
    /// `buckets.count - 1`; the bucket count is a power of two.
    @usableFromInline var mask: Int
    /// The number of entries.
    @usableFromInline var count = 0

    /// Creates a table with room for `capacity` entries before it grows.
    @usableFromInline
    init(capacity: Int) {
        var size = 8
        while size / 4 * 3 < capacity && size < 1 << 32 { size *= 2 }
        buckets = Array(repeating: 0, count: size)
        mask = size - 1
    }

    /// The tag of a hash value: its low 32 bits.
    @inlinable
    static func tag(_ hash: Int) -> UInt32 { UInt32(truncatingIfNeeded: hash) }

    @inlinable
    static func entry(tag: UInt32, slot: Int32) -> UInt64 { UInt64(tag) << 32 | UInt64(UInt32(slot) &+ 1) }

    @inlinable
    static func slot(of entry: UInt64) -> Int32 { Int32(truncatingIfNeeded: UInt32(truncatingIfNeeded: entry) &- 1) }

    @inlinable
    static func tag(of entry: UInt64) -> UInt32 { UInt32(truncatingIfNeeded: entry >> 32) }

    /// The bucket where probing for `tag` starts.
    @inlinable
    func home(_ tag: UInt32) -> Int { Int(tag) & mask }

    /// Adds `slot` under `tag`; the caller knows the key is not in the table.
    @inlinable
    mutating func insert(tag: UInt32, slot: Int32) {
        if (count + 1) * 4 > buckets.count * 3 { grow() }
        var bucket = home(tag)
        while buckets[bucket] != 0 { bucket = (bucket &+ 1) & mask }
        buckets[bucket] = Self.entry(tag: tag, slot: slot)
        count += 1
    }

    /// The bucket that holds exactly `tag` and `slot`.
    @inlinable
    func bucket(tag: UInt32, slot: Int32) -> Int {
        let wanted = Self.entry(tag: tag, slot: slot)
        var bucket = home(tag)
        while buckets[bucket] != wanted {
            precondition(buckets[bucket] != 0, "SlotTable: the entry is missing")
            bucket = (bucket &+ 1) & mask
        }
        return bucket
    }

    /// Points the entry of a node that moved from `old` to `new` at its new slot.
    @inlinable
    mutating func move(tag: UInt32, from old: Int32, to new: Int32) {
        buckets[bucket(tag: tag, slot: old)] = Self.entry(tag: tag, slot: new)
    }

    /// Removes the entry for `tag` and `slot`, shifting back the entries that probed past it.
    @inlinable
    mutating func remove(tag: UInt32, slot: Int32) {
        var hole = bucket(tag: tag, slot: slot)
        var next = (hole &+ 1) & mask
        while buckets[next] != 0 {
            // The entry at `next` may fill the hole unless its home lies after the hole, up to `next`.
            let distanceFromHome = (next &- home(Self.tag(of: buckets[next]))) & mask
            let distanceFromHole = (next &- hole) & mask
            if distanceFromHome >= distanceFromHole {
                buckets[hole] = buckets[next]
                hole = next
            }
            next = (next &+ 1) & mask
        }
        buckets[hole] = 0
        count -= 1
    }

    /// Removes every entry, keeping the buckets.
    @usableFromInline
    mutating func removeAll() {
        for index in buckets.indices { buckets[index] = 0 }
        count = 0
    }

    /// Doubles the buckets and places every entry again from its tag.
    @usableFromInline
    mutating func grow() {
        let old = buckets
        buckets = Array(repeating: 0, count: old.count * 2)
        mask = buckets.count - 1
        for entry in old where entry != 0 {
            var bucket = home(Self.tag(of: entry))
            while buckets[bucket] != 0 { bucket = (bucket &+ 1) & mask }
            buckets[bucket] = entry
        }
    }
}
