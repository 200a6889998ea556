/// One of the climber's experts: not a cache but a simulated policy, a miniature W-TinyLFU of key
/// hashes with a fixed window, run on the sampled keys (see `WindowExperts`).
///
/// It follows the index's rules at its own scale: a window, probation and protected (80 % of main)
/// regions, the duel with incumbency and idle victims (`AdmissionState.admits`), window hits not
/// counted in its own sketch, whose reset period follows its window share, and at most two region
/// moves per request; it moves every protected hit, where the index marks the entry and gives it a
/// second chance later (`AdmissionState.referencedBit`), which changes no hit rate measurably. Two
/// experts need no sketch:
/// the one whose window is everything (a plain LRU), and the one that admits every candidate (an
/// SLRU).
///
/// Everything is allocated when it is made, so a request never allocates. Nodes link by `UInt16`
/// numbers (at most 32 768 nodes); the hashes find their node through an open-addressing table of
/// twice as many `UInt16` cells, each 0 or a node number plus one.
///
/// Its buffers are `NodeBuffer`s, which do not copy on write by themselves: the index that owns the
/// expert calls ``makeUnique()`` before it feeds a request to a copy (see
/// `EvictionIndex.copyBuffers()`); why not `Array`s: Documentation/Decisions/0011.
///
/// Not thread-safe: its owner holds a lock around every call.
@usableFromInline
struct SimulatedPolicy {
    /// A simulated entry: its key's hash, its last request and its neighbours in its region.
    @usableFromInline
    struct Node {
        @usableFromInline var hash: UInt64 = 0
        @usableFromInline var stamp: UInt32 = 0
        @usableFromInline var prev = SimulatedPolicy.none
        @usableFromInline var next = SimulatedPolicy.none

        @inlinable
        init() {}
    }

    /// A region: its oldest and newest nodes and its size.
    @usableFromInline
    struct Region {
        @usableFromInline var head = SimulatedPolicy.none
        @usableFromInline var tail = SimulatedPolicy.none
        @usableFromInline var count = 0

        @inlinable
        init() {}
    }

    /// No node.
    @usableFromInline static var none: UInt16 { .max }
    /// The most nodes an expert can have.
    @usableFromInline static var largestCapacity: Int { 1 << 15 }
    /// The region numbers (a free node is in region 0).
    @usableFromInline static var window: UInt8 { 1 }
    @usableFromInline static var probation: UInt8 { 2 }
    @usableFromInline static var protected: UInt8 { 3 }
    /// The flag bit of a node hit while in probation or protected.
    @usableFromInline static var incumbent: UInt8 { 4 }

    /// The nodes, `capacity` of them.
    @usableFromInline var nodes: NodeBuffer<Node>
    /// Each node's region (the low two bits) and incumbent flag.
    @usableFromInline var flags: NodeBuffer<UInt8>
    /// The hash table: 0, or the number plus one of the node whose hash homes here or probed past.
    @usableFromInline var cells: NodeBuffer<UInt16>
    /// `64 - log2(cells.count)`.
    @usableFromInline let cellShift: UInt64
    /// `cells.count - 1`.
    @usableFromInline let cellMask: Int
    /// Regions 1 (window), 2 (probation) and 3 (protected); element 0 is unused.
    @usableFromInline var regions: NodeBuffer<Region>
    /// Nodes that have never held a hash start here.
    @usableFromInline var unused = 0
    /// The first of the nodes freed by evictions, linked by `next`.
    @usableFromInline var freeList = SimulatedPolicy.none
    /// The number of simulated entries.
    @usableFromInline var count = 0
    /// The most simulated entries.
    @usableFromInline let capacity: Int
    /// The window's size in entries.
    @usableFromInline let windowTarget: Int
    /// The most entries of the protected region.
    @usableFromInline let protectedTarget: Int
    /// Whether every candidate is admitted (no duel, no sketch).
    @usableFromInline let admitsAll: Bool
    /// Whether the expert keeps a sketch: it duels and its window is not everything.
    @usableFromInline let hasSketch: Bool
    /// The expert's own estimate of its keys' frequencies (empty without `hasSketch`).
    @usableFromInline var sketch: FrequencySketch
    /// The expert's request clock.
    @usableFromInline var now: UInt32 = 0
    /// `AdmissionState.idleThreshold` at the expert's scale.
    @usableFromInline let idleThreshold: UInt32

    /// Creates an empty expert.
    ///
    /// - Parameters:
    ///   - capacity: The most simulated entries (1 ... ``largestCapacity``).
    ///   - windowShare: The window's share of them (at least one entry).
    ///   - admitsAll: Whether every candidate is admitted.
    @usableFromInline
    init(capacity: Int, windowShare: Double, admitsAll: Bool) {
        precondition(capacity >= 1 && capacity <= Self.largestCapacity, "SimulatedPolicy capacity")
        self.capacity = capacity
        self.admitsAll = admitsAll
        (windowTarget, protectedTarget) = AdmissionState.targets(
            windowSize: max(1, windowShare * Double(capacity)),
            capacity: capacity
        )
        hasSketch = !admitsAll && windowShare < 1
        if hasSketch {
            sketch = FrequencySketch(words: capacity)
            sketch.setResetPeriod(AdmissionState.resetPeriod(windowTarget: windowTarget, capacity: capacity))
        } else {
            sketch = FrequencySketch(maximumCapacity: 1)
        }
        idleThreshold = UInt32(capacity * AdmissionState.idleRequestsPerEntry)
        nodes = NodeBuffer(repeating: Node(), count: capacity)
        flags = NodeBuffer(repeating: 0, count: capacity)
        let cellCount = FrequencySketch.powerOfTwo(atLeast: 2 * capacity)
        cells = NodeBuffer(repeating: 0, count: cellCount)
        cellShift = UInt64(64 - cellCount.trailingZeroBitCount)
        cellMask = cellCount - 1
        regions = NodeBuffer(repeating: Region(), count: 4)
    }

    /// Gives this expert its own buffers if a copy shares them: what its owner calls before the
    /// first request to a copy.
    ///
    /// - Complexity: O(capacity) when they are shared, O(1) otherwise.
    @usableFromInline
    mutating func makeUnique() {
        nodes.makeUnique()
        flags.makeUnique()
        cells.makeUnique()
        regions.makeUnique()
        sketch.makeUnique()
    }

    /// Requests the key of spread hash `hash`; returns whether it hit.
    ///
    /// A hit moves the key as its region says; a miss stores it, evicting first when the expert is
    /// full.
    @usableFromInline
    mutating func access(_ hash: UInt64) -> Bool {
        now &+= 1
        let node = find(hash)
        let region = node == Self.none ? 0 : flags[Int(node)] & 3
        // Window hits are correlated re-references: not counted.
        if hasSketch && region != Self.window { sketch.increment(hash) }
        if node != Self.none {
            if region == Self.probation {
                flags[Int(node)] |= Self.incumbent
                move(node, to: Self.protected)
                if regions[Int(Self.protected)].count > protectedTarget { demoteOldestProtected() }
            } else {
                if region == Self.protected { flags[Int(node)] |= Self.incumbent }
                if nodes[Int(node)].next != Self.none { move(node, to: region) }
            }
            rebalanceProtected()
            nodes[Int(node)].stamp = now
            return true
        }
        if count >= capacity { evict() }
        let fresh = allocate()
        nodes[Int(fresh)].hash = hash
        insertCell(fresh)
        append(fresh, to: Self.window)
        flags[Int(fresh)] = Self.window
        count += 1
        for _ in 0..<2 where regions[Int(Self.window)].count > windowTarget {
            move(regions[Int(Self.window)].head, to: Self.probation)
        }
        rebalanceProtected()
        nodes[Int(fresh)].stamp = now
        return false
    }

    /// Moves protected's oldest nodes to probation while protected is over its target, two at most.
    @inlinable
    mutating func rebalanceProtected() {
        for _ in 0..<2 where regions[Int(Self.protected)].count > protectedTarget { demoteOldestProtected() }
    }

    @inlinable
    mutating func demoteOldestProtected() {
        move(regions[Int(Self.protected)].head, to: Self.probation)
    }

    /// Frees one node of a full expert: main's victim, or the window's candidate, as the duel says.
    @usableFromInline
    mutating func evict() {
        let probationHead = regions[Int(Self.probation)].head
        let main = probationHead != Self.none ? probationHead : regions[Int(Self.protected)].head
        let candidate = regions[Int(Self.window)].head
        if main == Self.none {
            release(candidate)
        } else if candidate == Self.none || regions[Int(Self.window)].count < windowTarget {
            release(main)
        } else if admits(candidate, over: main) {
            release(main)
            move(candidate, to: Self.probation)
        } else {
            release(candidate)
        }
    }

    @inlinable @inline(__always)
    func admits(_ candidate: UInt16, over victim: UInt16) -> Bool {
        if admitsAll { return true }
        return AdmissionState.admits(
            candidateFrequency: sketch.frequency(nodes[Int(candidate)].hash),
            victimFrequency: sketch.frequency(nodes[Int(victim)].hash),
            victimIsIncumbent: flags[Int(victim)] & Self.incumbent != 0,
            victimIdleTime: now &- nodes[Int(victim)].stamp,
            idleThreshold: idleThreshold
        )
    }

    // MARK: - Nodes, regions and cells

    /// A node for a new entry: a freed one, else one never used.
    @inlinable
    mutating func allocate() -> UInt16 {
        if freeList != Self.none {
            let node = freeList
            freeList = nodes[Int(node)].next
            return node
        }
        unused += 1
        return UInt16(unused - 1)
    }

    /// Removes `node` from its region and the table, and frees it.
    @inlinable
    mutating func release(_ node: UInt16) {
        unlink(node)
        removeCell(node)
        flags[Int(node)] = 0
        nodes[Int(node)].next = freeList
        freeList = node
        count -= 1
    }

    /// Moves `node` to the newest end of `region` (which may be its own).
    @inlinable
    mutating func move(_ node: UInt16, to region: UInt8) {
        unlink(node)
        append(node, to: region)
        flags[Int(node)] = flags[Int(node)] & ~3 | region
    }

    /// Takes `node` out of its region.
    @inlinable
    mutating func unlink(_ node: UInt16) {
        let region = Int(flags[Int(node)] & 3)
        let prev = nodes[Int(node)].prev
        let next = nodes[Int(node)].next
        if prev != Self.none { nodes[Int(prev)].next = next } else { regions[region].head = next }
        if next != Self.none { nodes[Int(next)].prev = prev } else { regions[region].tail = prev }
        regions[region].count -= 1
    }

    /// Puts `node`, in no region, at the newest end of `region`; the caller sets its flags.
    @inlinable
    mutating func append(_ node: UInt16, to region: UInt8) {
        let tail = regions[Int(region)].tail
        nodes[Int(node)].prev = tail
        nodes[Int(node)].next = Self.none
        if tail != Self.none { nodes[Int(tail)].next = node } else { regions[Int(region)].head = node }
        regions[Int(region)].tail = node
        regions[Int(region)].count += 1
    }

    /// The cell where probing for `hash` starts.
    @inlinable @inline(__always)
    func home(_ hash: UInt64) -> Int {
        // A multiplicative remix: the sampled hashes share bits 24 and up (see `WindowExperts`).
        Int(truncatingIfNeeded: (hash &* 0xD1B5_4A32_D192_ED03) >> cellShift)
    }

    /// The node that holds `hash`, or ``none``.
    ///
    /// Always inlined, as are ``home(_:)`` and ``admits(_:over:)``: non-mutating, called without
    /// inlining from a mutating method, each was handed a copy of the whole expert.
    @inlinable @inline(__always)
    func find(_ hash: UInt64) -> UInt16 {
        let mask = cellMask
        var probe = home(hash)
        while true {
            let cell = cells[probe]
            if cell == 0 { return Self.none }
            if nodes[Int(cell - 1)].hash == hash { return cell - 1 }
            probe = (probe &+ 1) & mask
        }
    }

    /// Adds `node`, whose hash is new, to the table.
    @inlinable
    mutating func insertCell(_ node: UInt16) {
        let mask = cellMask
        var probe = home(nodes[Int(node)].hash)
        while cells[probe] != 0 { probe = (probe &+ 1) & mask }
        cells[probe] = node + 1
    }

    /// Removes `node` from the table, shifting back the cells that probed past it (as `SlotTable`).
    @inlinable
    mutating func removeCell(_ node: UInt16) {
        let mask = cellMask
        var hole = home(nodes[Int(node)].hash)
        while cells[hole] != node + 1 { hole = (hole &+ 1) & mask }
        var next = (hole &+ 1) & mask
        while cells[next] != 0 {
            let distanceFromHome = (next &- home(nodes[Int(cells[next] - 1)].hash)) & mask
            let distanceFromHole = (next &- hole) & mask
            if distanceFromHome >= distanceFromHole {
                cells[hole] = cells[next]
                hole = next
            }
            next = (next &+ 1) & mask
        }
        cells[hole] = 0
    }
}
