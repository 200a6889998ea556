// W-TinyLFU inside `EvictionIndex` (see `EvictionPolicy.wTinyLFU` for the policy itself).
//
// The index's lists 0, 1 and 2 are the window, probation and protected regions, each from least to
// most recently used; there are no frequency buckets (`firstBucket` stays -1). A node's `Meta.spread`
// holds its key's spread hash, so the sketch never hashes a key twice. Every decision reads only the
// region heads, their sizes and the sketch, so `victim`, `popVictim()` and `entriesInEvictionOrder`
// agree: the order is the sequence `popVictim()` would follow if called until the index is empty.

/// What W-TinyLFU keeps besides the links: the region sizes, the frequency sketch and the climber
/// that sizes the window, with the sampled plain LRU it measures the cache against.
@usableFromInline
struct AdmissionState {
    /// How often each key was used lately.
    @usableFromInline var sketch: FrequencySketch
    /// The number of entries in the window region.
    @usableFromInline var windowCount = 0
    /// The number of entries in the protected region.
    @usableFromInline var protectedCount = 0
    /// The window's target share of the entries.
    @usableFromInline var windowShare = AdmissionState.minimumWindowShare
    /// A plain LRU of the same size, simulated on a sample of the keys.
    @usableFromInline var recency: RecencyShadow
    /// On the sampled requests of the current sample, the plain LRU's hits minus the cache's.
    @usableFromInline var recencyAdvantage = 0
    /// Hits and new entries in the current sample.
    @usableFromInline var sampleRequests = 0
    /// Requests per sample.
    @usableFromInline var samplePeriod: Int
    /// How many samples the climber ended; for tests.
    @usableFromInline var climbs = 0

    /// The smallest window share: 1 %, enough entries for the window's hits to be measured.
    @usableFromInline static var minimumWindowShare: Double { 0.01 }
    /// The largest window share: every entry (pure LRU).
    @usableFromInline static var maximumWindowShare: Double { 1.0 }
    /// How far one sample moves the window share.
    @usableFromInline static var step: Double { 0.1 }
    /// The protected region's share of the main region.
    @usableFromInline static var protectedShare: Double { 0.8 }
    /// The fewest requests in a sample.
    @usableFromInline static var minimumSamplePeriod: Int { 512 }

    /// Creates the state for an index of at most `capacity` entries.
    @usableFromInline
    init(capacity: Int) {
        sketch = FrequencySketch(maximumCapacity: capacity)
        recency = RecencyShadow(capacity: capacity)
        samplePeriod = Self.minimumSamplePeriod
    }

    /// Ends a sample: grows the window one step if plain LRU would have hit more often than the
    /// cache on the sampled keys, shrinks it otherwise, and starts the next sample.
    ///
    /// The window is the cache's recency: at its largest the cache is plain LRU, at its smallest it
    /// is nearly all frequency. On `hoard-bench hitrate` the hit rate is monotonic in the window's
    /// share on every trace (fixed shares, measured: static Zipf and scans best at 1 %, the shifting
    /// trace at 5 % and 10 % best at 100 %), so the one question is whether more recency pays, and
    /// the simulated LRU answers it for the far end directly. Both see the same requests, so the
    /// difference is measured with little noise.
    ///
    /// Why the window is sized this way, and what was measured against it, is recorded in
    /// `Documentation/Decisions/0002-window-sizing-against-a-sampled-lru.md`.
    ///
    /// - Parameter count: The number of entries now; it sizes the next sample.
    @usableFromInline
    mutating func climb(count: Int) {
        let share = windowShare + (recencyAdvantage > 0 ? Self.step : -Self.step)
        windowShare = min(max(share, Self.minimumWindowShare), Self.maximumWindowShare)
        recencyAdvantage = 0
        sampleRequests = 0
        samplePeriod = max(Self.minimumSamplePeriod, count)
        climbs += 1
    }
}

/// Where a walk through the W-TinyLFU eviction order stands.
@usableFromInline
struct AdmissionCursor {
    @usableFromInline var window: Int32
    @usableFromInline var probation: Int32
    @usableFromInline var protected: Int32
    @usableFromInline var count: Int
    @usableFromInline var windowCount: Int

    @inlinable
    init(window: Int32, probation: Int32, protected: Int32, count: Int, windowCount: Int) {
        self.window = window
        self.probation = probation
        self.protected = protected
        self.count = count
        self.windowCount = windowCount
    }
}

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

    /// How many entries the window holds when the index holds `count`.
    @inlinable
    func windowTarget(forCount count: Int) -> Int {
        max(1, Int(Double(count) * admission.windowShare))
    }

    /// How many entries the protected region holds at most when the index holds `count`.
    @inlinable
    func protectedTarget(forCount count: Int) -> Int {
        Int(Double(max(0, count - windowTarget(forCount: count))) * AdmissionState.protectedShare)
    }

    /// Moves `slot` to the tail of `region`.
    @inlinable
    mutating func move(_ slot: Int32, to region: Int32) {
        let from = links[Int(slot)].list
        relink(slot, from: from, to: region)
        if from == Self.windowRegion { admission.windowCount -= 1 }
        if from == Self.protectedRegion { admission.protectedCount -= 1 }
        if region == Self.windowRegion { admission.windowCount += 1 }
        if region == Self.protectedRegion { admission.protectedCount += 1 }
    }

    /// Keeps the region sizes right after a node of `region` was unlinked.
    @inlinable
    mutating func regionDidLose(_ region: Int32) {
        if region == Self.windowRegion { admission.windowCount -= 1 }
        if region == Self.protectedRegion { admission.protectedCount -= 1 }
    }

    /// Adds a new entry as the window's most recent one, counting a miss.
    @inlinable
    mutating func insertIntoWindow(key: Key, hash keyHash: Int, payload: Payload, cost: Int) {
        let hash = FrequencySketch.spread(keyHash)
        let slot = appendEntry(key: key, hash: keyHash, payload: payload, spread: hash, cost: cost)
        appendNode(slot, to: Self.windowRegion)
        admission.windowCount += 1
        admission.sketch.ensureCapacity(entries.count)
        admission.sketch.increment(hash)
        recordRequest(hash, isHit: false)
        // A window over its share hands its oldest entries to probation: they were admitted when
        // the duel in `popVictim()` removed a main entry instead, or there was room. Two at most per
        // insert after the climber shrinks the window; the duel drains the rest.
        let target = windowTarget(forCount: entries.count)
        if admission.windowCount > target {
            move(lists[Int(Self.windowRegion)].head, to: Self.probationRegion)
            if admission.windowCount > target {
                move(lists[Int(Self.windowRegion)].head, to: Self.probationRegion)
            }
        }
    }

    /// Adds a restored entry as probation's most recent one, its frequency raised to `count`.
    @usableFromInline
    mutating func appendToProbation(key: Key, hash keyHash: Int, payload: Payload, count: UInt32) {
        let hash = FrequencySketch.spread(keyHash)
        let slot = appendEntry(key: key, hash: keyHash, payload: payload, spread: hash, cost: 0)
        appendNode(slot, to: Self.probationRegion)
        admission.sketch.ensureCapacity(entries.count)
        admission.sketch.raise(hash, to: Int(min(count, 15)))
    }

    /// Counts an access (a hit) to `slot` and moves it as its region says.
    @inlinable
    mutating func recordAdmissionAccess(_ slot: Int32) {
        admission.sketch.increment(metas[Int(slot)].spread)
        let region = links[Int(slot)].list
        if region == Self.probationRegion {
            // Used again while on probation: protected from now on; protected's oldest steps down.
            move(slot, to: Self.protectedRegion)
            if admission.protectedCount > protectedTarget(forCount: entries.count) {
                move(lists[Int(Self.protectedRegion)].head, to: Self.probationRegion)
            }
        } else if links[Int(slot)].next >= 0 {
            relink(slot, from: region, to: region)
        }
        recordRequest(metas[Int(slot)].spread, isHit: true)
    }

    /// Counts a request for the key of spread hash `hash` in the climber's sample, and in the
    /// simulated LRU if the key is sampled; climbs at the end of a sample.
    @inlinable
    mutating func recordRequest(_ hash: UInt64, isHit: Bool) {
        if admission.recency.samples(hash) {
            let recencyHit = admission.recency.access(hash, count: entries.count)
            admission.recencyAdvantage &+= (recencyHit ? 1 : 0) - (isHit ? 1 : 0)
        }
        admission.sampleRequests &+= 1
        if admission.sampleRequests >= admission.samplePeriod { admission.climb(count: entries.count) }
    }

    // MARK: - The eviction order

    /// A walk through the eviction order from its start.
    @inlinable
    var admissionCursor: AdmissionCursor {
        AdmissionCursor(
            window: lists[Int(Self.windowRegion)].head,
            probation: lists[Int(Self.probationRegion)].head,
            protected: lists[Int(Self.protectedRegion)].head,
            count: entries.count,
            windowCount: admission.windowCount
        )
    }

    /// The next slot in the eviction order after `cursor`, which it advances; -1 at the end.
    ///
    /// It is the slot `popVictim()` would remove if the entries before `cursor` were gone.
    ///
    /// The main region's victim is probation's oldest entry (protected's when probation is empty).
    /// While the window holds less than its share, the main victim goes and the window grows. Once
    /// it holds its share, its oldest entry (the candidate) replaces the main victim only if it is
    /// estimated to be used more often; otherwise the candidate itself goes.
    @inlinable
    func nextAdmissionVictim(_ cursor: inout AdmissionCursor) -> Int32 {
        let main = cursor.probation >= 0 ? cursor.probation : cursor.protected
        let chosen: Int32
        if main < 0 {
            chosen = cursor.window
        } else if cursor.window < 0 || cursor.windowCount < windowTarget(forCount: cursor.count) {
            chosen = main
        } else {
            let candidate = admission.sketch.frequency(metas[Int(cursor.window)].spread)
            chosen = candidate > admission.sketch.frequency(metas[Int(main)].spread) ? main : cursor.window
        }
        guard chosen >= 0 else { return -1 }
        let next = links[Int(chosen)].next
        if chosen == cursor.window {
            cursor.window = next
            cursor.windowCount -= 1
        } else if chosen == cursor.probation {
            cursor.probation = next
        } else {
            cursor.protected = next
        }
        cursor.count -= 1
        return chosen
    }

    /// The slot `popVictim()` removes next, or -1 when the index is empty.
    @inlinable
    func admissionVictim() -> Int32 {
        var cursor = admissionCursor
        return nextAdmissionVictim(&cursor)
    }

    /// The key removed next other than `key`.
    @usableFromInline
    func admissionVictim(excluding key: Key) -> Key? {
        var cursor = admissionCursor
        let first = nextAdmissionVictim(&cursor)
        guard first >= 0 else { return nil }
        if entries[Int(first)].key != key { return entries[Int(first)].key }
        let second = nextAdmissionVictim(&cursor)
        return second >= 0 ? entries[Int(second)].key : nil
    }

    /// Every entry in the order `popVictim()` would remove them, with its estimated frequency (at
    /// least 1) as its count.
    ///
    /// - Complexity: O(n).
    @usableFromInline
    var admissionEntriesInEvictionOrder: [(key: Key, payload: Payload, count: UInt32)] {
        var result: [(key: Key, payload: Payload, count: UInt32)] = []
        result.reserveCapacity(entries.count)
        var cursor = admissionCursor
        while true {
            let slot = nextAdmissionVictim(&cursor)
            guard slot >= 0 else { break }
            let frequency = admission.sketch.frequency(metas[Int(slot)].spread)
            result.append((entries[Int(slot)].key, entries[Int(slot)].payload, UInt32(max(1, frequency))))
        }
        return result
    }
}
