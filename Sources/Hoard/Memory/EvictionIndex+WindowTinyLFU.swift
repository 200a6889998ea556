// W-TinyLFU inside `EvictionIndex` (see `EvictionPolicy.wTinyLFU` for the policy itself): the regions,
// hits, new entries and evictions.
//
// The index's lists 0, 1 and 2 are the window, probation and protected regions, each from least to
// most recently used; there are no frequency buckets (`firstBucket` stays -1). The duels, which read other
// entries than the one requested, mix a node's sketch hash from its tag; a hit mixes it from the
// key's hash value it has at hand (the same bits). A node's `Entry.stamp` holds the request
// clock at its last request, whether it was hit in main (see `AdmissionState.incumbentBit`) and, in
// protected, whether it was hit since it last moved (`AdmissionState.referencedBit`), so a hit
// that moves nothing writes only the entry it reads. The state besides the entries is `AdmissionState`; the
// experts that size the window are `WindowExperts`. The eviction order, which `victim` and
// `entriesInEvictionOrder` read, is in `EvictionIndex+AdmissionOrder.swift`.
//
// Every request moves at most a few nodes between regions (two from an over-full window to
// probation, two from an over-full protected region to probation), so every operation is O(1);
// a window that the climber shrank drains over the following requests.
//
// A hit moves one node at most: a probation hit joins protected, and protected's oldest entries
// step down to probation only when a new entry comes (two at most per insert), which costs hits
// fewer list moves than stepping down at each promotion and loses no hit rate (Decisions/0011). A
// hit on a protected entry moves nothing: it marks the entry, which gets a second chance, a move to
// protected's newest end, when it reaches the oldest end (a CLOCK over protected; Decisions/0023).

extension EvictionIndex {
    @inlinable static var windowRegion: Int32 { 0 }
    @inlinable static var probationRegion: Int32 { 1 }
    @inlinable static var protectedRegion: Int32 { 2 }

    /// Makes the three empty regions, lists 0, 1 and 2 (`windowRegion`, `probationRegion`,
    /// `protectedRegion`).
    @usableFromInline
    mutating func makeRegions() {
        lists = [NodeList(accessCount: 0), NodeList(accessCount: 0), NodeList(accessCount: 0)]
        admission.windowCount = 0
        admission.protectedCount = 0
    }

    /// Moves `slot` to the tail of `region`, with `stamp` as its last request.
    @inlinable
    mutating func move(_ slot: Int32, to region: Int32, stamp: UInt32) {
        let from = entries[Int(slot)].list
        relink(slot, from: from, to: region, stamp: stamp)
        if from == Self.windowRegion { admission.windowCount -= 1 }
        if from == Self.protectedRegion { admission.protectedCount -= 1 }
        if region == Self.windowRegion { admission.windowCount += 1 }
        if region == Self.protectedRegion { admission.protectedCount += 1 }
    }

    /// Moves `slot` to the tail of `region`, keeping its stamp (last request and incumbency).
    @inlinable
    mutating func move(_ slot: Int32, to region: Int32) {
        move(slot, to: region, stamp: entries[Int(slot)].stamp)
    }

    /// Keeps the region sizes right after a node of `region` was unlinked.
    @inlinable
    mutating func regionDidLose(_ region: Int32) {
        if region == Self.windowRegion { admission.windowCount -= 1 }
        if region == Self.protectedRegion { admission.protectedCount -= 1 }
    }

    /// Moves protected's oldest entries to probation while protected is over its target, two at most.
    @inlinable
    mutating func rebalanceProtected() {
        if admission.protectedCount > admission.protectedTarget {
            demoteProtectedHead(secondChances: Self.secondChanceLimit)
            if admission.protectedCount > admission.protectedTarget {
                demoteProtectedHead(secondChances: Self.secondChanceLimit)
            }
        }
    }

    /// The most entries hit in protected that one step down moves to protected's newest end before it
    /// takes the oldest entry, hit or not.
    ///
    /// Each hit marks an entry once and each second chance clears a mark, so the moves cost a
    /// request O(1) on average; the limit bounds what one insert can cost when many marked entries
    /// lie at the oldest end (after a sweep of hits over the whole region, say).
    @inlinable static var secondChanceLimit: Int { 64 }

    /// When probation is empty and protected is not, steps protected's victim down to probation
    /// (``protectedVictim``, with every second chance), where the pop that follows takes it: an
    /// entry hit in protected is not evicted before the others.
    @inlinable
    mutating func stepDownProtectedVictim() {
        if lists[Int(Self.probationRegion)].head < 0 && lists[Int(Self.protectedRegion)].head >= 0 {
            demoteProtectedHead(secondChances: .max)
        }
    }

    /// Moves protected's oldest entry that was not hit since it last moved to probation's newest end;
    /// each entry hit since it last moved that comes first goes to protected's newest end instead,
    /// unmarked, up to `secondChances` of them (then the oldest goes, hit or not).
    ///
    /// Protected must not be empty. With no limit, the entries step down in the order
    /// `nextAdmissionVictim(_:)` walks protected: the unmarked ones, oldest first, then the marked
    /// ones, oldest first.
    /// - Complexity: O(1) plus one list move per second chance.
    @inlinable
    mutating func demoteProtectedHead(secondChances: Int) {
        var head = lists[Int(Self.protectedRegion)].head
        var chances = 0
        while entries[Int(head)].stamp & AdmissionState.referencedBit != 0 && chances < secondChances {
            let unmarked = entries[Int(head)].stamp & ~AdmissionState.referencedBit
            relink(head, from: Self.protectedRegion, to: Self.protectedRegion, stamp: unmarked)
            chances += 1
            head = lists[Int(Self.protectedRegion)].head
        }
        move(head, to: Self.probationRegion, stamp: entries[Int(head)].stamp & ~AdmissionState.referencedBit)
    }

    /// Adds a new entry as the window's most recent one, counting a request.
    ///
    /// The owner made room first (``popVictim()``), so the index may hold one entry more than its
    /// capacity only when the owner allows it.
    @inlinable
    mutating func insertIntoWindow(key: Key, hash keyHash: Int, payload: Payload, cost: Int) {
        linkIntoWindow(appendEntry(key: key, hash: keyHash, payload: payload, cost: cost), hash: keyHash)
    }

    /// Puts `slot`, a new entry in no list whose key's hash value is `keyHash`, as the window's most
    /// recent one, counting a request.
    @inlinable
    mutating func linkIntoWindow(_ slot: Int32, hash keyHash: Int) {
        let now = admission.tick()
        let hash = FrequencySketch.spread(keyHash)
        appendNode(slot, to: Self.windowRegion, stamp: now)
        admission.windowCount += 1
        admission.sketch.ensureCapacity(entries.count)
        admission.sketch.increment(hash)
        // A window over its target hands its oldest entries to probation: two at most per insert
        // after the climber shrinks the window; the duel in `popVictim()` drains the rest.
        if admission.windowCount > admission.windowTarget {
            move(lists[Int(Self.windowRegion)].head, to: Self.probationRegion)
            if admission.windowCount > admission.windowTarget {
                move(lists[Int(Self.windowRegion)].head, to: Self.probationRegion)
            }
        }
        rebalanceProtected()
        if admission.experts.samples(hash) { admission.observe(hash, isFull: entries.count >= admission.capacity) }
    }

    /// Adds a restored entry as probation's most recent one, its frequency raised to `count`.
    @usableFromInline
    mutating func appendToProbation(key: Key, hash keyHash: Int, payload: Payload, count: UInt32) {
        let hash = FrequencySketch.spread(keyHash)
        let slot = appendEntry(key: key, hash: keyHash, payload: payload, cost: 0)
        appendNode(slot, to: Self.probationRegion, stamp: admission.now)
        admission.sketch.ensureCapacity(entries.count)
        admission.sketch.raise(hash, to: Int(min(count, 15)))
    }

    /// ``access(_:hash:)`` under W-TinyLFU.
    ///
    /// The sketch's four words are read before the table is: the key's hash gives them, so their
    /// memory misses overlap those of the table and the entry instead of following them.
    @inlinable
    mutating func admissionAccess(_ key: Key, hash keyHash: Int) -> Payload? {
        let hash = FrequencySketch.spread(keyHash)
        let counters = admission.sketchCounters(hash)
        guard let slot = slot(for: key, hash: keyHash) else { return nil }
        makeUnique()
        recordAdmissionAccess(slot, spread: hash, counters: counters)
        return entries[Int(slot)].payload
    }

    /// Counts a request (a hit) to `slot`, whose key's hash value is `keyHash`, and moves it as its
    /// region says.
    ///
    /// A window hit is not counted in the sketch: it is a correlated re-reference (LRU-K's
    /// "correlated reference period"), and counting it let bursty keys beat keys that are reused
    /// (`multi2` at 250, 500 and 2 000 entries lost 3.8, 6.1 and 1.9 points).
    @inlinable
    mutating func recordAdmissionAccess(_ slot: Int32, hash keyHash: Int) {
        let hash = FrequencySketch.spread(keyHash)
        recordAdmissionAccess(slot, spread: hash, counters: admission.sketchCounters(hash))
    }

    /// ``recordAdmissionAccess(_:hash:)`` given the key's spread hash and where its counters are in
    /// the sketch, with the smallest of them.
    @inlinable
    mutating func recordAdmissionAccess(
        _ slot: Int32,
        spread hash: UInt64,
        counters: (positions: FrequencySketch.Positions, smallest: UInt64)
    ) {
        let now = admission.tick()
        let region = entries[Int(slot)].list
        // A window entry is never an incumbent; a main hit makes one.
        let stamp = region == Self.windowRegion ? now : now | AdmissionState.incumbentBit
        if region != Self.windowRegion {
            admission.sketch.increment(at: counters.positions, smallest: counters.smallest)
        }
        if region == Self.probationRegion {
            // Used again while on probation: protected from now on.
            move(slot, to: Self.protectedRegion, stamp: stamp)
        } else if region == Self.protectedRegion {
            // Stays where it is, marked: its second chance comes at protected's oldest end. The
            // list's neighbours and tail, which the other core's hits in this shard would also
            // write, are not touched.
            entries[Int(slot)].stamp = stamp | AdmissionState.referencedBit
        } else if links[Int(slot)].next >= 0 {
            relink(slot, from: region, to: region, stamp: stamp)
        } else {
            entries[Int(slot)].stamp = stamp
        }
        if admission.experts.samples(hash) { admission.observe(hash, isFull: entries.count >= admission.capacity) }
    }

    /// Removes the entry the eviction order names first; a window candidate that wins its duel
    /// moves to probation's tail.
    @inlinable
    mutating func popAdmissionVictim() -> Entry? {
        stepDownProtectedVictim()
        let choice = admissionChoice()
        guard choice.victim >= 0 else { return nil }
        // Before the removal, which may move the last slot into the victim's.
        if choice.admitted >= 0 { move(choice.admitted, to: Self.probationRegion) }
        return remove(slot: choice.victim)
    }
}
