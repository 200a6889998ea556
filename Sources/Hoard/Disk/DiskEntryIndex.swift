/// The eviction order of a disk store's entry files, with the total size of those files.
///
/// Every change to the entries goes through it, so ``byteCount`` is always the sum of the sizes it
/// holds. Not thread-safe: the store holds its state lock around every call.
///
/// An entry costs 40 bytes in the eviction index's entries, not 48, before the index's list and
/// stamp (8 more): it keeps bytes 4 to 31 of the digest (``Tail``) and the size and expiry in
/// 4-byte words (``Info``), and the index's tag for the entry, which it keeps anyway, stands for
/// the digest's first 4 bytes: the store passes ``tag(of:)``, a keyed permutation of them, as every
/// key's hash, and ``digest(tail:tag:)`` undoes it. The permutation's key is drawn for each index, so which digests share a home cell in the
/// index's table cannot be chosen by whoever chooses the keys. Lookups compare whole tags as well as
/// tails (`EvictionIndex.comparesTags`): a forged index file may hold two digests that differ only
/// in their first 4 bytes.
///
/// Under W-TinyLFU the index is compact (see `AdmissionState.init(capacity:runsClimber:compact:)`):
/// two entries share a word of the frequency sketch (4.2 bytes per entry, not 8.4 as a memory
/// level's), and the simulations that size the window sample half as many keys (2 bytes per entry,
/// not 4). On synthetic Zipf and scan traces of 5 000 to 10 000 entries a memory level with such a
/// sketch hit 0.3 to 0.5 points less often: the price, for a disk level behind a memory level, of
/// holding a million entries in 80 bytes each.
struct DiskEntryIndex {
    /// Bytes 4 to 31 of a digest, in 4-byte words (so that an entry needs no 8-byte alignment).
    struct Tail: Hashable {
        var words: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32)

        init(_ digest: SHA256Digest) {
            words = (
                UInt32(truncatingIfNeeded: digest.word0),
                UInt32(truncatingIfNeeded: digest.word1 >> 32), UInt32(truncatingIfNeeded: digest.word1),
                UInt32(truncatingIfNeeded: digest.word2 >> 32), UInt32(truncatingIfNeeded: digest.word2),
                UInt32(truncatingIfNeeded: digest.word3 >> 32), UInt32(truncatingIfNeeded: digest.word3)
            )
        }

        static func == (lhs: Tail, rhs: Tail) -> Bool {
            lhs.words.0 == rhs.words.0 && lhs.words.1 == rhs.words.1 && lhs.words.2 == rhs.words.2
                && lhs.words.3 == rhs.words.3 && lhs.words.4 == rhs.words.4 && lhs.words.5 == rhs.words.5
                && lhs.words.6 == rhs.words.6
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(words.0)
            hasher.combine(words.1)
            hasher.combine(words.2)
            hasher.combine(words.3)
            hasher.combine(words.4)
            hasher.combine(words.5)
            hasher.combine(words.6)
        }
    }

    /// A ``DiskEntryInfo`` in 12 bytes: the size in 32 bits (`UInt32.max`: see `largeSizes`) and the
    /// expiry's exact bits in two words.
    struct Info {
        var size: UInt32
        var expiryLow: UInt32
        var expiryHigh: UInt32
    }

    private var order: EvictionIndex<Tail, Info>
    /// The key of ``tag(of:)``'s permutation.
    private let tagKey: UInt32
    /// The sizes of the entries of 4 GiB or more, whose ``Info`` holds `UInt32.max`.
    private var largeSizes: [SHA256Digest: Int] = [:]
    /// The sum of the entries' file sizes, in bytes, in 64 bits with wrapping arithmetic.
    ///
    /// An index file is not trusted to be sane, and sizes read from a forged one must not trap (nor
    /// overflow a 32-bit `Int`). The sum is exact whenever the real one fits in 63 bits.
    private var bytes: Int64 = 0

    /// The sum of the entries' file sizes, in bytes (clamped to `Int`'s range).
    var byteCount: Int { Int(clamping: bytes) }

    init(policy: EvictionPolicy, capacity: Int, tagKey: UInt32 = .random(in: .min ... .max)) {
        order = EvictionIndex(policy: policy, capacity: capacity, compact: true, comparesTags: true)
        self.tagKey = tagKey
    }

    // MARK: Packing

    /// The tag of `digest` in the eviction index: its first 4 bytes, xored with the index's key and
    /// mixed by MurmurHash3's finalizer, a bijection.
    @inline(__always)
    func tag(of digest: SHA256Digest) -> UInt32 {
        var bits = UInt32(truncatingIfNeeded: digest.word0 >> 32) ^ tagKey
        bits ^= bits >> 16
        bits &*= 0x85EB_CA6B
        bits ^= bits >> 13
        bits &*= 0xC2B2_AE35
        bits ^= bits >> 16
        return bits
    }

    /// The digest whose tail and tag (see ``tag(of:)``) these are.
    @inline(__always)
    func digest(tail: Tail, tag: UInt32) -> SHA256Digest {
        // The finalizer's steps undone in reverse order; the multipliers' inverses modulo 2³².
        var bits = tag
        bits ^= bits >> 16
        bits &*= 0x7ED1_B41D
        bits ^= bits >> 13 ^ bits >> 26
        bits &*= 0xA5CB_9243
        bits ^= bits >> 16
        let head = bits ^ tagKey
        let words = tail.words
        return SHA256Digest(
            word0: UInt64(head) << 32 | UInt64(words.0),
            word1: UInt64(words.1) << 32 | UInt64(words.2),
            word2: UInt64(words.3) << 32 | UInt64(words.4),
            word3: UInt64(words.5) << 32 | UInt64(words.6)
        )
    }

    /// What the eviction index takes as the hash of `digest`.
    @inline(__always)
    private func hash(_ digest: SHA256Digest) -> Int { Int(truncatingIfNeeded: tag(of: digest)) }

    /// The digest of the entry in `slot` of the eviction index.
    @inline(__always)
    private func digest(inSlot slot: Int32) -> SHA256Digest {
        digest(tail: order.entries[Int(slot)].key, tag: order.tags[Int(slot)])
    }

    /// Packs `info` for `digest`, keeping a size that 32 bits do not hold in `largeSizes`.
    private mutating func pack(_ info: DiskEntryInfo, for digest: SHA256Digest) -> Info {
        let bits = info.expiresAt.deadline.bitPattern
        let size: UInt32
        if let small = UInt32(exactly: info.size), small != .max {
            size = small
            // Mostly empty: no hash of the digest then.
            if !largeSizes.isEmpty { largeSizes[digest] = nil }
        } else {
            size = .max
            largeSizes[digest] = info.size
        }
        return Info(
            size: size,
            expiryLow: UInt32(truncatingIfNeeded: bits),
            expiryHigh: UInt32(truncatingIfNeeded: bits >> 32)
        )
    }

    /// The ``DiskEntryInfo`` that `info` packs for `digest`.
    @inline(__always)
    private func unpack(_ info: Info, for digest: SHA256Digest) -> DiskEntryInfo {
        let deadline = Double(bitPattern: UInt64(info.expiryHigh) << 32 | UInt64(info.expiryLow))
        // Clamped, not converted: where `Int` has 32 bits a `UInt32` may not fit (no size there does).
        let size = (info.size == .max ? largeSizes[digest] : nil) ?? Int(clamping: info.size)
        return DiskEntryInfo(size: size, expiresAt: Expiry(uncheckedDeadline: deadline))
    }

    // MARK: Entries

    /// The number of entries.
    var count: Int { order.count }

    /// Whether an entry exists for `key`, without counting an access.
    @inline(__always)
    func contains(_ key: SHA256Digest) -> Bool { order.contains(Tail(key), hash: hash(key)) }

    /// The entry for `key`, without counting an access.
    @inline(__always)
    func peek(_ key: SHA256Digest) -> DiskEntryInfo? {
        order.peek(Tail(key), hash: hash(key)).map { unpack($0, for: key) }
    }

    /// Every entry with its access count, next victim first.
    var entriesInEvictionOrder: [(key: SHA256Digest, payload: DiskEntryInfo, count: UInt32)] {
        order.slotsInEvictionOrder.map { slot, count in
            let digest = digest(inSlot: slot)
            return (digest, unpack(order.entries[Int(slot)].payload, for: digest), count)
        }
    }

    /// Returns the entry for `key` and counts an access to it.
    mutating func access(_ key: SHA256Digest) -> DiskEntryInfo? {
        order.access(Tail(key), hash: hash(key)).map { unpack($0, for: key) }
    }

    /// Stores the entry for `key`, counting an access.
    mutating func upsert(_ info: DiskEntryInfo, forKey key: SHA256Digest) {
        let old = peek(key)
        if let old { subtract(old.size) }
        order.upsert(pack(info, for: key), forKey: Tail(key), hash: hash(key))
        add(info.size)
    }

    /// Adds an entry with a restored access count (see `EvictionIndex.append(_:forKey:count:hash:)`).
    mutating func append(_ info: DiskEntryInfo, forKey key: SHA256Digest, count: UInt32) {
        if let old = peek(key) { subtract(old.size) }
        order.append(pack(info, for: key), forKey: Tail(key), count: count, hash: hash(key))
        add(info.size)
    }

    /// ``append(_:forKey:count:)`` for a key the index does not hold, without looking it up: for
    /// keys known to be distinct, such as the names of a folder's entry files.
    mutating func appendNew(_ info: DiskEntryInfo, forKey key: SHA256Digest, count: UInt32) {
        assert(peek(key) == nil, "appendNew: the index holds the key already")
        order.appendNew(pack(info, for: key), forKey: Tail(key), count: count, hash: hash(key))
        add(info.size)
    }

    /// Makes room for `capacity` entries in all, and in the entries' buffers an eighth more.
    ///
    /// See `EvictionIndex.reserveCapacity(_:headroom:)`. With the eighth, the writes that follow a
    /// load do not copy every buffer at once while holding the store's lock; room not written takes
    /// no resident memory.
    mutating func reserveCapacity(_ capacity: Int) { order.reserveCapacity(capacity, headroom: capacity / 8) }

    /// Removes the entry for `key`; returns it.
    @discardableResult
    mutating func removeValue(forKey key: SHA256Digest) -> DiskEntryInfo? {
        guard let packed = order.removeValue(forKey: Tail(key), hash: hash(key)) else { return nil }
        let old = unpack(packed, for: key)
        largeSizes[key] = nil
        subtract(old.size)
        return old
    }

    /// Removes every entry.
    mutating func removeAll() {
        order.removeAll()
        largeSizes = [:]
        bytes = 0
    }

    private mutating func add(_ size: Int) { bytes &+= Int64(truncatingIfNeeded: size) }
    private mutating func subtract(_ size: Int) { bytes &-= Int64(truncatingIfNeeded: size) }

    /// Checks the eviction order's links and counts (see `EvictionIndex.checkInvariants()`).
    func checkInvariants() {
        order.checkInvariants(tagsFromKeys: false)
        for slot in 0..<Int32(order.count) {
            precondition(tag(of: digest(inSlot: slot)) == order.tags[Int(slot)], "digest from its tail and tag")
        }
        let large = (0..<Int32(order.count)).filter { order.entries[Int($0)].payload.size == .max }
        precondition(large.count == largeSizes.count, "large sizes")
        precondition(large.allSatisfy { largeSizes[digest(inSlot: $0)] != nil }, "a large size kept aside")
        let sizes = (0..<Int32(order.count)).map { unpack(order.entries[Int($0)].payload, for: digest(inSlot: $0)) }
        precondition(sizes.reduce(Int64(0)) { $0 &+ Int64($1.size) } == bytes, "byte count")
    }

    /// An entry removed to make room, and which limit it made room for.
    typealias Victim = (key: SHA256Digest, payload: DiskEntryInfo, reason: EvictionReason)

    /// Removes entries in eviction order, never `spared`, until `extraCount` more entries and
    /// `extraBytes` more bytes fit within `capacity` and `byteLimit`; returns the removed entries.
    ///
    /// - Complexity: O(1) per victim; O(n) once when `spared` is the next victim by the policy.
    mutating func makeRoom(
        forCount extraCount: Int,
        bytes extraBytes: Int,
        capacity: Int,
        byteLimit: Int?,
        sparing spared: SHA256Digest? = nil
    ) -> [Victim] {
        /// The limit that does not hold yet, or `nil` when both hold.
        func exceededLimit(_ index: DiskEntryIndex) -> EvictionReason? {
            if index.count + extraCount > capacity { return .capacity }
            if let byteLimit,
                index.bytes &+ Int64(truncatingIfNeeded: extraBytes) > Int64(truncatingIfNeeded: byteLimit)
            {
                return .cost
            }
            return nil
        }
        var victims: [Victim] = []
        while let reason = exceededLimit(self), let slot = order.victimSlot {
            let key = digest(inSlot: slot)
            if key == spared {
                // The spared entry comes first: take the others in their order.
                for entry in entriesInEvictionOrder where entry.key != spared {
                    guard let reason = exceededLimit(self) else { break }
                    removeValue(forKey: entry.key)
                    victims.append((entry.key, entry.payload, reason))
                }
                break
            }
            let payload = unpack(order.entries[Int(slot)].payload, for: key)
            _ = order.popVictim()
            largeSizes[key] = nil
            subtract(payload.size)
            victims.append((key, payload, reason))
        }
        return victims
    }
}

// Safe because the index is a value: its only reference-typed storage is the eviction index's
// buffers, which every change to the eviction index copies first when another copy shares them (one
// `isKnownUniquelyReferenced` check of its owner token, see `EvictionIndex.makeUnique()`), so two
// copies on two threads never write one allocation. (The store keeps its index in its `Locked`
// state and never hands it out; the conformance lets that state be `Sendable`.)
extension DiskEntryIndex: @unchecked Sendable {}
