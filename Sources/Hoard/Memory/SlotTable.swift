/// The hash table of an eviction index: from a key's hash to the slot of its node.
///
/// Open addressing with linear probing, one `UInt32` per cell: the slot number plus one in the cell's
/// low bits, as many as the table has positions (its `slotMask`), and the same high bits of the key's
/// tag (the low 32 bits of its hash) above them; 0 is an empty cell. Keys live only in the nodes,
/// so a cell costs 4 bytes, and a lookup compares the tag bits the cell keeps before it reads a
/// node: at a million entries 11 of them, so one probe in 2 048 that is not the key reads a node.
/// The table stays at most three-quarters full, so a slot (below the entry count) always fits below
/// the tag bits. Removal shifts the following entries back, so no tombstones build up.
///
/// The low bits of a tag, which give an entry's home cell (where its probing starts), are not in
/// its cell: removing and growing read them from the index's tags, which the caller passes. With
/// 8-byte cells that held the whole tag, the table cost twice the memory (about 17 bytes per entry
/// at a million, against 8.4) and a memory hit read twice as many memory lines of it.
///
/// Not thread-safe; not generic: the index finds keys (see `EvictionIndex.slot(for:hash:)`) and
/// keeps each node's tag. Copies share their cells until ``makeUnique()``, as `NodeBuffer` says: the
/// index calls it before it changes a table it may share with a copy.
@usableFromInline
struct SlotTable {
    /// The cells, each 0 or an entry's tag bits and slot (see ``cell(tag:slot:)``).
    ///
    /// A `NodeBuffer` rather than an `Array`, whose every write checked uniqueness with a call into
    /// the runtime: a new entry writes one cell, and a removal one or more. The cells also start on a
    /// memory line, so a probe that stays within 16 cells reads one line.
    @usableFromInline var cells: NodeBuffer<UInt32>
    /// `cells.count - 1`; the cell count is a power of two.
    @usableFromInline var mask: Int
    /// The low bits of a cell, which hold its slot plus one: `mask` in 32 bits.
    @usableFromInline var slotMask: UInt32
    /// The number of entries.
    @usableFromInline var count = 0

    /// The most cells a table has: slots are `Int32`, so fewer than 2³¹ entries, which fit in 2³²
    /// cells three-quarters full (2³⁰ where `Int` has 32 bits, more than such a process can hold).
    @usableFromInline static var largestSize: Int { Int.bitWidth > 32 ? 1 << 32 : 1 << 30 }

    /// Creates a table with room for `capacity` entries before it grows.
    @usableFromInline
    init(capacity: Int) {
        var size = 8
        while size / 4 * 3 < capacity && size < Self.largestSize { size *= 2 }
        cells = NodeBuffer(repeating: 0, count: size)
        mask = size - 1
        slotMask = UInt32(truncatingIfNeeded: mask)
    }

    /// The tag of a hash value: its low 32 bits.
    @inlinable
    static func tag(_ hash: Int) -> UInt32 { UInt32(truncatingIfNeeded: hash) }

    /// What a cell holds for the entry with `tag` in `slot`: never 0.
    @inlinable
    func cell(tag: UInt32, slot: Int32) -> UInt32 { tag & ~slotMask | UInt32(bitPattern: slot &+ 1) }

    /// The slot in a cell that is not empty.
    @inlinable
    func slot(of cell: UInt32) -> Int32 { Int32(bitPattern: (cell & slotMask) &- 1) }

    /// Whether a cell that is not empty may hold the entry with `tag`: whether the tag bits it keeps
    /// are those of `tag`.
    @inlinable
    func cell(_ cell: UInt32, mayHold tag: UInt32) -> Bool { (cell ^ tag) & ~slotMask == 0 }

    /// The home of `tag`: the position of the cell where probing for it starts.
    @inlinable
    func home(_ tag: UInt32) -> Int { Int(truncatingIfNeeded: tag) & mask }

    /// Grows the table until `capacity` entries fit in it without growing again; `tags` holds the
    /// tag of every slot in the table.
    ///
    /// - Complexity: O(n) in the number of cells it ends with.
    @usableFromInline
    mutating func reserveCapacity(_ capacity: Int, tags: NodeBuffer<UInt32>) {
        guard cells.count / 4 * 3 < capacity && cells.count < Self.largestSize else { return }
        // An empty table is made at its final size at once, not doubled step by step.
        if count == 0 {
            self = SlotTable(capacity: capacity)
            return
        }
        while cells.count / 4 * 3 < capacity && cells.count < Self.largestSize { grow(tags: tags) }
    }

    /// Adds `slot` under `tag`; the caller knows the key is not in the table, and `tags` holds the
    /// tag of every slot in the table, this one's included.
    @inlinable
    mutating func insert(tag: UInt32, slot: Int32, tags: NodeBuffer<UInt32>) {
        if (count + 1) * 4 > cells.count * 3 { grow(tags: tags) }
        var probe = home(tag)
        while cells[probe] != 0 { probe = (probe &+ 1) & mask }
        cells[probe] = cell(tag: tag, slot: slot)
        count += 1
    }

    /// The position of the cell that holds exactly `tag` and `slot`, probing from the home of `tag`.
    @inlinable
    func position(tag: UInt32, slot: Int32) -> Int {
        let wanted = cell(tag: tag, slot: slot)
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
        cells[position(tag: tag, slot: old)] = cell(tag: tag, slot: new)
    }

    /// Removes the entry for `tag` and `slot`, shifting back the entries that probed past it, whose
    /// homes `tags` gives.
    @inlinable
    mutating func remove(tag: UInt32, slot: Int32, tags: NodeBuffer<UInt32>) {
        var hole = position(tag: tag, slot: slot)
        var next = (hole &+ 1) & mask
        while cells[next] != 0 {
            // The entry at `next` may fill the hole unless its home lies after the hole, up to `next`.
            let distanceFromHome = (next &- home(tags[Int(self.slot(of: cells[next]))])) & mask
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

    /// Doubles the cells and places every entry again from its tag in `tags`.
    ///
    /// - Complexity: O(n) in the number of cells.
    @usableFromInline
    mutating func grow(tags: NodeBuffer<UInt32>) {
        precondition(cells.count < Self.largestSize, "SlotTable: more entries than slots")
        let old = self
        cells = NodeBuffer(repeating: 0, count: old.cells.count * 2)
        mask = cells.count - 1
        slotMask = UInt32(truncatingIfNeeded: mask)
        for oldCell in old.cells where oldCell != 0 {
            let slot = old.slot(of: oldCell)
            let tag = tags[Int(slot)]
            var probe = home(tag)
            while cells[probe] != 0 { probe = (probe &+ 1) & mask }
            cells[probe] = cell(tag: tag, slot: slot)
        }
    }
}
