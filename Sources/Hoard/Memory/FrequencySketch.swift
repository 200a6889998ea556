/// An estimate of how often each key was seen lately: a count-min sketch of 4-bit counters that halve
/// periodically.
///
/// Each key maps to four counters (in four 64-bit words of 16 counters each, all four words in one
/// 64-byte block, see ``positions(_:)``); an increment raises
/// only the smallest of them (a conservative update), and the estimate is the smallest. Counters stop
/// at 15. After ``resetPeriod`` increments every counter is halved, so the estimate follows what is
/// popular now rather than what was popular long ago; the owner sets the period (W-TinyLFU ties it to
/// its window, see `AdmissionState`). The table holds one word (16 counters) per key tracked, at
/// least `minimumSize` words, and grows with the number of entries of its owner up to
/// `maximumCapacity` keys.
///
/// The hash it takes is ``spread(_:)`` of the key's `hashValue`, computed once per entry.
///
/// Not thread-safe: its owner holds a lock around every call. Copies share their counters until
/// ``makeUnique()``, as `NodeBuffer` says: the owner calls it before it changes a sketch it may
/// share with a copy.
@usableFromInline
struct FrequencySketch {
    /// The counters, 16 per word; `table.count` is a power of two.
    ///
    /// A `NodeBuffer` rather than an `Array`: a hit's increment writes up to four words with no
    /// uniqueness check (``increment(at:smallest:)``; the owner checks once per operation), where
    /// an array checked for each write, or went through a closure the optimizer left uninlined.
    @usableFromInline var table = NodeBuffer<UInt64>()
    /// `64 - log2(table.count)`: a word index is the top bits of a hash.
    @usableFromInline var shift: UInt64 = 64
    /// The most words the table will ever have: a power of two.
    @usableFromInline let maximumSize: Int
    /// The fewest words the table has once it exists: a power of two.
    @usableFromInline let minimumSize: Int
    /// Increments since the last halving.
    @usableFromInline var additions = 0
    /// Increments between two halvings.
    @usableFromInline private(set) var resetPeriod = Int.max

    /// The largest table, in keys tracked (one 64-bit word each): 8 MiB.
    @usableFromInline static var largestCapacity: Int { 1 << 20 }

    /// Creates an empty sketch that allocates nothing until ``ensureCapacity(_:)``.
    ///
    /// - Parameters:
    ///   - maximumCapacity: The most keys worth tracking (the owner's count limit).
    ///   - minimumSize: The fewest words of the table, rounded up to a power of two: with fewer, the
    ///     keys that a small owner sees in one reset period collide too often.
    @usableFromInline
    init(maximumCapacity: Int, minimumSize: Int = 16) {
        self.minimumSize = Self.powerOfTwo(atLeast: min(max(16, minimumSize), Self.largestCapacity))
        maximumSize = max(
            self.minimumSize,
            Self.powerOfTwo(atLeast: min(max(1, maximumCapacity), Self.largestCapacity))
        )
    }

    /// Creates a sketch of a fixed size: the smallest power of two of at least `words` words (and 16).
    @usableFromInline
    init(words: Int) {
        self.init(maximumCapacity: words, minimumSize: words)
        ensureCapacity(words)
    }

    /// The smallest power of two that is at least `count`.
    static func powerOfTwo(atLeast count: Int) -> Int {
        var size = 1
        while size < count { size <<= 1 }
        return size
    }

    /// Mixes a key's `hashValue` into the 64 bits the sketch indexes with.
    ///
    /// Only its low 32 bits count, the key's tag in an eviction index (`SlotTable.tag(_:)`), so that
    /// an index can mix it again from the tag it keeps rather than keep this hash too.
    @inlinable
    static func spread(_ hashValue: Int) -> UInt64 { spread(tag: SlotTable.tag(hashValue)) }

    /// Mixes a key's tag (the low 32 bits of its `hashValue`) into the 64 bits the sketch indexes
    /// with.
    @inlinable
    static func spread(tag: UInt32) -> UInt64 {
        var bits = UInt64(tag) &* 0x9E37_79B9_7F4A_7C15
        bits ^= bits >> 31
        bits &*= 0xD6E8_FEB8_6659_FD93
        return bits ^ (bits >> 32)
    }

    /// Makes the table large enough for `keys` keys (capped at the maximum).
    ///
    /// Growing keeps every estimate: a word splits into the two words its keys now map to.
    /// - Complexity: O(table size) when it grows, which doubling makes O(1) amortised.
    @inlinable
    mutating func ensureCapacity(_ keys: Int) {
        guard keys > table.count && table.count < maximumSize else { return }
        grow(toward: keys)
    }

    @usableFromInline
    mutating func grow(toward keys: Int) {
        var size = max(minimumSize, table.count)
        let wanted = min(keys, maximumSize)
        while size < wanted { size <<= 1 }
        if table.isEmpty {
            table = NodeBuffer(repeating: 0, count: size)
        } else if size > table.count {
            // Block `b` of a table of 2^k blocks is the top k bits of the hash; with one more bit it
            // becomes block 2b or 2b + 1, which both start with its counters.
            let factor = size / table.count
            var grown = NodeBuffer<UInt64>(repeating: 0, count: size)
            for block in 0..<table.count / Self.blockWords {
                for part in 0..<factor {
                    let target = (block * factor + part) * Self.blockWords
                    for word in 0..<Self.blockWords { grown[target + word] = table[block * Self.blockWords + word] }
                }
            }
            table = grown
        }
        shift = UInt64(64 - size.trailingZeroBitCount)
    }

    /// Gives this sketch its own counters if a copy shares them.
    ///
    /// - Complexity: O(table size) when they are shared, O(1) otherwise.
    @inlinable
    mutating func makeUnique() { table.makeUnique() }

    /// Sets the number of increments between two halvings (at least 1); if more have passed since the
    /// last one, the next increment halves.
    @usableFromInline
    mutating func setResetPeriod(_ period: Int) {
        resetPeriod = max(1, period)
        additions = min(additions, resetPeriod)
    }

    /// The words of a block, which holds all four counters of a key.
    @inlinable static var blockWords: Int { 8 }

    /// The word and bit offset of the key's `which`-th counter (0 to 3).
    @inlinable
    func position(_ hash: UInt64, _ which: UInt64) -> (word: Int, offset: UInt64) {
        let positions = positions(hash)
        return (positions.word(Int(which)), positions.offset(Int(which)))
    }

    /// Where a key's four counters are: their block, and in it their words and bit offsets.
    ///
    /// Scalars rather than `SIMD4` lanes: x86-64's baseline has no shift by a different amount per
    /// lane, which makes the lanes slower than scalars (Decisions/0011).
    @usableFromInline
    struct Positions {
        /// The block's first word.
        @usableFromInline let block: Int
        /// Bit `i`: whether counter `i` is in word `2i + 1` of the block rather than `2i`.
        @usableFromInline let choice: UInt64
        /// Bits `4i` to `4i + 3`: the nibble of counter `i` in its word.
        @usableFromInline let nibbles: UInt64

        @inlinable @inline(__always)
        init(block: Int, choice: UInt64, nibbles: UInt64) {
            self.block = block
            self.choice = choice
            self.nibbles = nibbles
        }

        /// The word of counter `which` (0 to 3).
        @inlinable @inline(__always)
        func word(_ which: Int) -> Int { block | which << 1 | Int(truncatingIfNeeded: choice >> UInt64(which) & 1) }

        /// The bit offset of counter `which` (0 to 3) in its word.
        @inlinable @inline(__always)
        func offset(_ which: Int) -> UInt64 { (nibbles >> (UInt64(which) << 2) & 15) << 2 }
    }

    /// The four words and bit offsets of the key's counters: ``position(_:_:)`` for 0 to 3.
    ///
    /// The four counters lie in one block of ``blockWords`` words, 64 bytes, which the table's
    /// alignment keeps on one memory line (as in Caffeine's sketch): the block from the top bits of
    /// the hash, counter `i` in word `2i` or `2i + 1` of it, so no two share a word, and a nibble of
    /// that word from the low bits, so that a hit touches one memory line of the sketch rather than
    /// four (Decisions/0011).
    @inlinable @inline(__always)
    func positions(_ hash: UInt64) -> Positions {
        let block = Int(truncatingIfNeeded: hash >> shift) & ~(Self.blockWords - 1)
        // A remix for the words, whose bits do not overlap the block's or the nibbles' (bits 24 and up
        // also pick the climber's sample).
        return Positions(block: block, choice: (hash &* 0x9E37_79B9_7F4A_7C15) >> 60, nibbles: hash & 0xFFFF)
    }

    @inlinable
    func counter(_ hash: UInt64, _ which: UInt64) -> UInt64 {
        let (word, offset) = position(hash, which)
        return (table[word] >> offset) & 15
    }

    /// The estimated number of increments of the key (0 to 15) since it was last forgotten.
    @inlinable @inline(__always)
    func frequency(_ hash: UInt64) -> Int {
        guard !table.isEmpty else { return 0 }
        return Int(smallestCounter(at: positions(hash)))
    }

    /// The smallest of the four counters at `positions`, which the table must have (it is not empty).
    @inlinable @inline(__always)
    func smallestCounter(at positions: Positions) -> UInt64 {
        let first = min(counter(at: positions, 0), counter(at: positions, 1))
        return min(first, min(counter(at: positions, 2), counter(at: positions, 3)))
    }

    /// Counter `which` (0 to 3) at `positions`.
    @inlinable @inline(__always)
    func counter(at positions: Positions, _ which: Int) -> UInt64 {
        (table[positions.word(which)] >> positions.offset(which)) & 15
    }

    /// Counts one more occurrence of the key; halves every counter once per reset period.
    @inlinable @inline(__always)
    mutating func increment(_ hash: UInt64) {
        guard !table.isEmpty else { return }
        let positions = positions(hash)
        increment(at: positions, smallest: smallestCounter(at: positions))
    }

    /// Counts one more occurrence of the key whose counters are at `positions` (``positions(_:)``
    /// of its hash, the table not empty), the smallest of them being `smallest` now.
    ///
    /// On the hit path, which read the counters before finding the entry.
    @inlinable @inline(__always)
    mutating func increment(at positions: Positions, smallest: UInt64) {
        guard smallest < 15 else { return }
        table.withMutableView { table in
            // `positions` gives words below `table.count`: the top bits of a hash.
            for which in 0..<4 {
                let (word, offset) = (positions.word(which), positions.offset(which))
                // Re-reads the counter, so two probes landing on the same counter raise it once.
                // Without a branch: which counters are the smallest is a coin toss for the
                // processor, and the branches cost an evicting set two mispredictions.
                let isSmallest: UInt64 = (table[word] >> offset) & 15 == smallest ? 1 : 0
                table[word] &+= isSmallest << offset
            }
        }
        additions += 1
        if additions >= resetPeriod { halve() }
    }

    /// Raises the key's counters to at least `frequency` (capped at 15); restores a saved count.
    @inlinable
    mutating func raise(_ hash: UInt64, to frequency: Int) {
        guard !table.isEmpty else { return }
        let target = UInt64(min(max(frequency, 0), 15))
        for which in 0..<UInt64(4) {
            let (word, offset) = position(hash, which)
            let current = (table[word] >> offset) & 15
            if current < target { table[word] &+= (target - current) << offset }
        }
    }

    /// Halves every counter (rounding down).
    ///
    /// - Complexity: O(table size), once per reset period, so O(1) amortised.
    @usableFromInline
    mutating func halve() {
        additions /= 2
        table.withMutableView { table in
            for word in 0..<table.count { table[word] = (table[word] >> 1) & 0x7777_7777_7777_7777 }
        }
    }
}
