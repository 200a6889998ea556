/// The eviction order of a cache level: a hash table from key to slot, plus lists of nodes.
///
/// Entries live in parallel buffers indexed by slot (see `Entry`) and link to each other by `Int32`
/// slot numbers, so an entry costs no allocation of its own. Each node is in one list (a `NodeList`
/// in `lists`), which holds its nodes from least to most recently used. The words for the parts:
///
/// - A *frequency bucket* (LRU and LFU) is a list of the nodes that share one access count. The
///   frequency buckets form a chain in increasing count, from `firstBucket` to `lastBucket`; the
///   victim is always the head of the first one. LRU is the special case in which every node stays
///   in the count-1 bucket and an access only moves the node to that bucket's tail. See
///   `EvictionIndex+LFU.swift`.
/// - A *region* (W-TinyLFU) is one of the lists 0, 1 and 2: the window, probation and protected
///   regions, outside the chain of frequency buckets. A node's sketch position is mixed from its
///   tag (`FrequencySketch.spread(tag:)`). See `EvictionIndex+WindowTinyLFU.swift`.
/// - A *probe* is a step of the hash table's search for a key; the table's positions are its
///   *cells* (see `SlotTable`).
///
/// The lists' link machinery is in `EvictionIndex+Links.swift`, storing and removing entries in their
/// slots in `EvictionIndex+Slots.swift`, the entry given up next in `EvictionIndex+Victims.swift`, the
/// entries' costs in `EvictionIndex+Costs.swift`, saving and restoring the order in
/// `EvictionIndex+Restore.swift`, and the consistency checks in `EvictionIndex+Invariants.swift`.
///
/// It has value semantics: a copy changes independently of the original. Its buffers do not copy on
/// write by themselves (see `NodeBuffer`): every method that changes the index calls
/// ``makeUnique()`` once, before its first write, and the writes after it check nothing. A method
/// added here that writes must do the same, and no buffer may be copied out of the index and kept.
///
/// Not thread-safe: its owner (a memory store, a disk store) holds a lock around every call.
@usableFromInline
struct EvictionIndex<Key: Hashable, Payload> {
    /// What an entry holds: its key, what the owner stores with it, its list and its stamp.
    ///
    /// The parts of an entry live in parallel buffers indexed by its slot, split by when they are
    /// read: `entries`, `links`, `tags` and `costs`. A hit reads the table and the entry (its key,
    /// then its payload, list and stamp); an LRU or LFU hit, and a W-TinyLFU hit that moves its
    /// entry, also the links of the entry and of its neighbours. The links of all entries take an
    /// eighth of the memory whole nodes took, so a neighbour's links are more often already in a
    /// processor cache, and a hit touches fewer memory pages. With whole 64-byte nodes, a uniform
    /// hit over 100k entries ran at about 0.8× a plain LRU whose 32-byte nodes hold only a key, a
    /// value and two links; split, at about 1.1× (LRU with 12-byte links; 1.17× LRU and 1.06× LFU
    /// with 16).
    ///
    /// The list and the stamp are here, not in the links, because every hit reads the one and
    /// writes the other, and reads the entry's key anyway: beside the links they cost a W-TinyLFU
    /// hit on a protected entry, which moves nothing, one more memory line (callgrind, uniform hits
    /// over 100 000 `String` keys in a `Cache<Int>`: 4.49 second-level misses a hit there, 4.00
    /// here; beside the tag, every LFU hit touched one more line and page too). The memory is the
    /// same: the links shrink by what the entry grows. The price is that more entries span two
    /// lines: a `Cache<Int>`'s entry went from 32 bytes to 40, three in eight across two lines.
    @usableFromInline
    struct Entry {
        @usableFromInline var key: Key
        @usableFromInline var payload: Payload
        /// The list the entry is in: its frequency bucket (LRU, LFU) or its region (W-TinyLFU); -1
        /// while in none.
        @usableFromInline var list: Int32 = -1
        /// The index clock at the entry's last access (LFU and W-TinyLFU; 0 under LRU).
        ///
        /// Under LFU it orders the entries of two frequency buckets that aging merges (see
        /// ``nextStamp()`` for why 32 bits never wrap there). Under W-TinyLFU its low 30 bits are the
        /// request clock `AdmissionState.now` at the entry's last request, which tells idle victims;
        /// its top bit whether the entry was hit in probation or protected since it was stored (an
        /// incumbent; see `AdmissionState.incumbentBit`); and the next, in protected, whether it was
        /// hit since it last moved (`AdmissionState.referencedBit`).
        @usableFromInline var stamp: UInt32 = 0

        @inlinable
        init(key: Key, payload: Payload) {
            self.key = key
            self.payload = payload
        }
    }

    /// An entry's neighbours in its list: what a hit that moves the entry reads or writes of the
    /// entry and of its neighbours.
    ///
    /// 8 bytes, so eight to a memory line and none across two; they stay in a processor cache far
    /// longer than the entries themselves.
    @usableFromInline
    struct Link {
        @usableFromInline var prev: Int32 = -1
        @usableFromInline var next: Int32 = -1

        @inlinable
        init() {}

        @inlinable
        init(prev: Int32, next: Int32) {
            self.prev = prev
            self.next = next
        }
    }

    /// A list of nodes, least recently used first: a frequency bucket or a region.
    @usableFromInline
    struct NodeList {
        /// The access count the nodes of a frequency bucket share; 0 for a region.
        @usableFromInline var accessCount: UInt32
        @usableFromInline var head: Int32 = -1
        @usableFromInline var tail: Int32 = -1
        /// The frequency bucket before this one in the chain, or -1 (always -1 for a region).
        @usableFromInline var prev: Int32 = -1
        /// The frequency bucket after this one in the chain, or -1 (always -1 for a region).
        @usableFromInline var next: Int32 = -1

        @inlinable
        init(accessCount: UInt32) { self.accessCount = accessCount }
    }

    @usableFromInline let policy: EvictionPolicy
    /// Whether a key is found only where its whole tag matches too: for an owner whose keys leave out
    /// what its hashes hold (`DiskEntryIndex`, whose keys are digests less the 4 bytes the tag
    /// stands for), so that two keys equal but for their tags are two entries.
    @usableFromInline let comparesTags: Bool
    /// From each key's hash to its node's slot.
    @usableFromInline var table: SlotTable
    /// Each slot's key, payload, list and stamp.
    @usableFromInline var entries = NodeBuffer<Entry>()
    /// Each slot's neighbours in its list.
    @usableFromInline var links = NodeBuffer<Link>()
    /// Each slot's tag: the low 32 bits of its key's hash value, which give its home cell in `table`
    /// (whose cells keep only the tag's high bits) and, under W-TinyLFU, its counters in the
    /// frequency sketch.
    ///
    /// 4 bytes: the sketch's hash is mixed again from the tag when a duel needs it, rather than
    /// kept (8 more bytes per entry, 12 with padding).
    @usableFromInline var tags = NodeBuffer<UInt32>()
    /// What each slot costs against the owner's cost limit, or nothing while every cost is 0.
    ///
    /// An owner without a cost limit (a disk store keeps sizes in its payloads) saves 8 bytes per
    /// entry; once a cost is not 0, it has one element per slot.
    @usableFromInline var costs = NodeBuffer<Int>()
    /// The frequency buckets (LRU, LFU) or the three regions (W-TinyLFU); an `Entry.list` indexes it.
    @usableFromInline var lists = NodeBuffer<NodeList>()
    /// The frequency bucket with the lowest access count, or -1 (always -1 under W-TinyLFU).
    @usableFromInline var firstBucket: Int32 = -1
    /// The frequency bucket with the highest access count, or -1 (always -1 under W-TinyLFU).
    @usableFromInline var lastBucket: Int32 = -1
    /// The numbers in `lists` of removed frequency buckets, for ``makeBucket(accessCount:after:)`` to
    /// reuse.
    @usableFromInline var freeBuckets: [Int32] = []
    /// The stamp of the last access (LFU); see ``nextStamp()``.
    @usableFromInline var clock: UInt32 = 0
    @usableFromInline let agingPeriod: Int
    @usableFromInline var agingCountdown: Int
    /// The sum of every entry's cost.
    @usableFromInline var totalCost = 0
    /// W-TinyLFU's region sizes, frequency sketch, clock and window experts; unused by the other
    /// policies.
    @usableFromInline var admission: AdmissionState
    /// Shared by the copies of the index, as its buffers are: see ``makeUnique()``.
    @usableFromInline var owner = NodeBufferOwner()

    /// Creates an empty index.
    ///
    /// - Parameters:
    ///   - policy: The eviction policy.
    ///   - capacity: The most entries the owner keeps; sets the LFU aging period.
    ///   - runsClimber: Under W-TinyLFU, whether the index sizes its window itself (see
    ///     `AdmissionState.init(capacity:runsClimber:compact:)`).
    ///   - compact: Under W-TinyLFU, whether the index trades a little hit rate for memory (see
    ///     `AdmissionState.init(capacity:runsClimber:compact:)`).
    ///   - comparesTags: Whether a lookup compares whole tags as well as keys (see ``comparesTags``).
    @usableFromInline
    init(
        policy: EvictionPolicy,
        capacity: Int,
        runsClimber: Bool = true,
        compact: Bool = false,
        comparesTags: Bool = false
    ) {
        self.policy = policy
        self.comparesTags = comparesTags
        let (product, overflow) = capacity.multipliedReportingOverflow(by: 10)
        agingPeriod = overflow ? Int.max : max(1_024, product)
        agingCountdown = agingPeriod
        admission =
            policy == .wTinyLFU
            ? AdmissionState(capacity: capacity, runsClimber: runsClimber, compact: compact)
            : .unused
        table = SlotTable(capacity: capacity > 0 && capacity < 1 << 20 ? capacity : 0)
        if policy == .wTinyLFU { makeRegions() }
    }

    /// The number of entries.
    @inlinable
    var count: Int { entries.count }

    /// Gives this index its own buffers if a copy shares them: what every method that changes the
    /// index calls before its first write.
    ///
    /// One uniqueness check, of ``owner``, stands for all the buffers (the table's cells, the node
    /// buffers, the sketch), which a copy of the index shares all together. A check at each write,
    /// as `Array` does, cost a W-TinyLFU hit three calls into the runtime and a new entry with an
    /// eviction 25 to 30.
    ///
    /// - Complexity: O(n) when a copy shares the buffers, O(1) otherwise.
    @inlinable @inline(__always)
    mutating func makeUnique() {
        if _slowPath(!isKnownUniquelyReferenced(&owner)) { copyBuffers() }
    }

    /// Copies every buffer a copy of the index shares, and takes an owner of its own.
    ///
    /// The owner is replaced last: while this index still holds the shared one, the other copies
    /// see it shared and do not write, so a copy on another thread never writes a buffer this one is
    /// still reading from.
    ///
    /// - Complexity: O(n).
    @usableFromInline @inline(never)
    mutating func copyBuffers() {
        table.makeUnique()
        entries.makeUnique()
        links.makeUnique()
        tags.makeUnique()
        costs.makeUnique()
        lists.makeUnique()
        admission.makeUnique()
        owner = NodeBufferOwner()
    }

    /// The slot of the node for `key`, whose hash value is `hash`.
    ///
    /// Always inlined: called without inlining from a mutating method, it would be handed a copy of
    /// the whole index (300 bytes and more) on every hit.
    @inlinable @inline(__always)
    func slot(for key: Key, hash: Int) -> Int32? {
        let tag = SlotTable.tag(hash)
        var probe = table.home(tag)
        while true {
            let cell = table.cells[probe]
            if cell == 0 { return nil }
            if table.cell(cell, mayHold: tag) {
                let slot = table.slot(of: cell)
                if entries[Int(slot)].key == key && (!comparesTags || tags[Int(slot)] == tag) { return slot }
            }
            probe = (probe &+ 1) & table.mask
        }
    }

    /// Whether an entry exists for `key`, without counting an access.
    ///
    /// Always inlined, as ``slot(for:hash:)`` is: called from a set, which holds the index `inout`,
    /// it was handed a copy of the whole index (336 bytes under `Cache<Int>`), a tenth of an
    /// evicting LRU set's instructions.
    @inlinable @inline(__always)
    func contains(_ key: Key, hash: Int? = nil) -> Bool { slot(for: key, hash: hash ?? key.hashValue) != nil }

    /// The payload stored for `key`, without counting an access.
    @inlinable @inline(__always)
    func peek(_ key: Key, hash: Int? = nil) -> Payload? {
        guard let slot = slot(for: key, hash: hash ?? key.hashValue) else { return nil }
        return entries[Int(slot)].payload
    }

    /// Returns the payload stored for `key` and counts an access to it.
    ///
    /// - Parameters:
    ///   - key: The key.
    ///   - hash: `key.hashValue`, when the caller has it already.
    /// - Returns: The payload, or `nil` when no entry exists for `key`.
    @inlinable
    mutating func access(_ key: Key, hash: Int? = nil) -> Payload? {
        let hash = hash ?? key.hashValue
        if policy == .wTinyLFU { return admissionAccess(key, hash: hash) }
        guard let slot = slot(for: key, hash: hash) else { return nil }
        makeUnique()
        recordAccess(slot, hash: hash)
        return entries[Int(slot)].payload
    }

    /// Stores `payload` for `key`, counting an access; returns the payload it replaced.
    ///
    /// The owner makes room first (``popVictim()``) when a new key would exceed its capacity.
    /// `cost` counts against the owner's cost limit, if it has one (see ``totalCost``).
    @discardableResult
    @inlinable
    mutating func upsert(_ payload: Payload, forKey key: Key, cost: Int = 0, hash: Int? = nil) -> Payload? {
        makeUnique()
        let hash = hash ?? key.hashValue
        if let slot = slot(for: key, hash: hash) { return update(slot, with: payload, cost: cost, hash: hash) }
        insert(newKey: key, hash: hash, payload: payload, cost: cost)
        return nil
    }

    /// Stores `payload` in `slot`, whose key's hash value is `hash`, counting an access; returns the
    /// payload it replaced: the half of ``upsert(_:forKey:cost:hash:)`` for a key the index holds,
    /// for an owner that looked the key up already (``slot(for:hash:)``).
    @discardableResult
    @inlinable
    mutating func update(_ slot: Int32, with payload: Payload, cost: Int = 0, hash: Int) -> Payload {
        makeUnique()
        let old = entries[Int(slot)].payload
        entries[Int(slot)].payload = payload
        setCost(cost, of: slot)
        recordAccess(slot, hash: hash)
        return old
    }

    /// Stores `payload` for `key`, which the index does not hold, counting an access: the half of
    /// ``upsert(_:forKey:cost:hash:)`` for a new key, for an owner that looked the key up already.
    @inlinable
    mutating func insert(newKey key: Key, hash: Int, payload: Payload, cost: Int = 0) {
        makeUnique()
        if policy == .wTinyLFU {
            insertIntoWindow(key: key, hash: hash, payload: payload, cost: cost)
            return
        }
        insertNew(key: key, hash: hash, payload: payload, count: 1, cost: cost)
        tickAging()
    }

    /// Removes the entry for `key`; returns its payload.
    @discardableResult
    @inlinable
    mutating func removeValue(forKey key: Key, hash: Int? = nil) -> Payload? {
        guard let slot = slot(for: key, hash: hash ?? key.hashValue) else { return nil }
        makeUnique()
        return remove(slot: slot).payload
    }

    /// Removes every entry.
    ///
    /// - Complexity: O(n) in the table's size.
    @usableFromInline
    mutating func removeAll() {
        makeUnique()
        table.removeAll()
        totalCost = 0
        entries.removeAll()
        links.removeAll()
        tags.removeAll()
        costs.removeAll()
        lists.removeAll()
        freeBuckets.removeAll()
        firstBucket = -1
        lastBucket = -1
        if policy == .wTinyLFU { makeRegions() }
    }
}
