/// The hash table of an eviction index: from a key's hash to the slot of its node.
///
/// Open addressing with linear probing, one `UInt64` per cell: the low 32 bits of the key's hash
/// (its tag) above the slot number plus one; 0 is an empty cell. Keys live only in the nodes, so
/// a cell costs 8 bytes, a lookup compares tags before it reads a node, and growing or removing
/// never hashes a key again (the tag gives each entry's home cell, where its probing starts). The
/// table stays at most three-quarters full. Removal shifts the following entries back, so no
/// tombstones build up.
///
/// Not thread-safe; not generic: the index finds keys (see `EvictionIndex.slot(for:hash:)`) and
/// keeps each node's tag. Copies share their cells until ``makeUnique()``, as `NodeBuffer` says: the
/// index calls it before it changes a table it may share with a copy.
@usableFromInline
struct SlotTable {
    /// The cells, each 0 or an entry's tag and slot (see ``cell(tag:slot:)``).
    ///
    /// A `NodeBuffer` rather than an `Array`, whose every write checked uniqueness with a call into
    /// the runtime: a new entry writes one cell, and a removal one or more. The cells also start on a
    /// memory line, so a probe that stays within 8 cells reads one line.
    @usableFromInline var cells: NodeBuffer<UInt64>
    /// `cells.count - 1`; the cell count is a power of two.
    @usableFromInline var mask: Int
    /// The number of entries.
    @usableFromInline var count = 0

    /// Creates a table with room for `capacity` entries before it grows.
    @usableFromInline
    init(capacity: Int) {
        var size = 8
        while size / 4 * 3 < capacity && size < 1 << 32 { size *= 2 }
        cells = NodeBuffer(repeating: 0, count: size)
        mask = size - 1
    }

    /// The tag of a hash value: its low 32 bits.
    @inlinable
    static func tag(_ hash: Int) -> UInt32 { UInt32(truncatingIfNeeded: hash) }

    /// What a cell holds for the entry with `tag` in `slot`: never 0.
    @inlinable
    static func cell(tag: UInt32, slot: Int32) -> UInt64 { UInt64(tag) << 32 | UInt64(UInt32(slot) &+ 1) }

    /// The slot in a cell that is not empty.
    @inlinable
    static func slot(of cell: UInt64) -> Int32 { Int32(truncatingIfNeeded: UInt32(truncatingIfNeeded: cell) &- 1) }

    /// The tag in a cell that is not empty.
    @inlinable
    static func tag(of cell: UInt64) -> UInt32 { UInt32(truncatingIfNeeded: cell >> 32) }

    /// The home of `tag`: the position of the cell where probing for it starts.
    @inlinable
    func home(_ tag: UInt32) -> Int { Int(truncatingIfNeeded: tag) & mask }

    /// Adds `slot` under `tag`; the caller knows the key is not in the table.
    @inlinable
    mutating func insert(tag: UInt32, slot: Int32) {
        if (count + 1) * 4 > cells.count * 3 { grow() }
        var probe = home(tag)
        while cells[probe] != 0 { probe = (probe &+ 1) & mask }
        cells[probe] = Self.cell(tag: tag, slot: slot)
        count += 1
    }

    /// The position of the cell that holds exactly `tag` and `slot`, probing from the home of `tag`.
    @inlinable
    func position(tag: UInt32, slot: Int32) -> Int {
        let wanted = Self.cell(tag: tag, slot: slot)
        var probe = home(tag)
        while cells[probe] != wanted {
            precondition(cells[probe] != 0, "SlotTable: the entry is missing")
            probe = (probe &+ 1) & mask
        }
        return probe
    }

    /// Points the cell of a node that moved from `old` to `new` at its new slot.
    @inlinable
    mutating func move(tag: UInt32, from old: Int32, to new: Int32) {
        cells[position(tag: tag, slot: old)] = Self.cell(tag: tag, slot: new)
    }

    /// Removes the entry for `tag` and `slot`, shifting back the entries that probed past it.
    @inlinable
    mutating func remove(tag: UInt32, slot: Int32) {
        var hole = position(tag: tag, slot: slot)
        var next = (hole &+ 1) & mask
        while cells[next] != 0 {
            // The entry at `next` may fill the hole unless its home lies after the hole, up to `next`.
            let distanceFromHome = (next &- home(Self.tag(of: cells[next]))) & mask
            let distanceFromHole = (next &- hole) & mask
            if distanceFromHome >= distanceFromHole {
                cells[hole] = cells[next]
                hole = next
            }
            next = (next &+ 1) & mask
        }
        cells[hole] = 0
        count -= 1
    }

    /// Gives this table its own cells if a copy shares them.
    ///
    /// - Complexity: O(n) in the number of cells when they are shared, O(1) otherwise.
    @inlinable
    mutating func makeUnique() { cells.makeUnique() }

    /// Removes every entry, keeping the cells.
    ///
    /// - Complexity: O(n) in the number of cells.
    @usableFromInline
    mutating func removeAll() {
        for index in cells.indices { cells[index] = 0 }
        count = 0
    }

    /// Doubles the cells and places every entry again from its tag.
    ///
    /// - Complexity: O(n) in the number of cells.
    @usableFromInline
    mutating func grow() {
        let old = cells
        cells = NodeBuffer(repeating: 0, count: old.count * 2)
        mask = cells.count - 1
        for cell in old where cell != 0 {
            var probe = home(Self.tag(of: cell))
            while cells[probe] != 0 { probe = (probe &+ 1) & mask }
            cells[probe] = cell
        }
    }
}
