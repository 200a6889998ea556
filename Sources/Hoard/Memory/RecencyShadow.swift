/// A plain LRU cache of key hashes, simulated on a sample of the keys: how often pure recency would hit
/// at the owner's size.
///
/// Spatial sampling, as in SHARDS (Waldspurger et al., FAST 2015): only keys whose hash falls in a fixed
/// 1/`rate` of the hash space are simulated, in an LRU of 1/`rate` of the owner's entries. Because the
/// sample is a uniform choice of keys, the scaled-down LRU hits about as often on them as the full one
/// would. W-TinyLFU's climber compares it with the cache on the same requests (see
/// `AdmissionState.climb(count:)`).
///
/// It stores a hash and two links per simulated key, in arrays that grow by doubling; the dictionary
/// from hash to node grows the same way.
///
/// Not thread-safe: its owner holds a lock around every call.
@usableFromInline
struct RecencyShadow {
    /// The hash each node stands for.
    @usableFromInline var hashes: [UInt64] = []
    /// Each node's less recently used neighbour, or -1.
    @usableFromInline var older: [Int32] = []
    /// Each node's more recently used neighbour, or -1.
    @usableFromInline var newer: [Int32] = []
    /// The node of each simulated hash.
    @usableFromInline var nodes: [UInt64: Int32] = [:]
    /// Nodes whose key was dropped, for reuse.
    @usableFromInline var freeNodes: [Int32] = []
    /// The least recently used node, or -1.
    @usableFromInline var oldest: Int32 = -1
    /// The most recently used node, or -1.
    @usableFromInline var newest: Int32 = -1
    /// `log2(rate)`.
    @usableFromInline let rateShift: Int

    /// The most keys simulated (1 024 nodes of about 32 bytes).
    ///
    /// A few hundred keys already decide the climber's question; 4 096 measured no better on
    /// `hoard-bench hitrate` and cost four times the memory.
    @usableFromInline static var largestSize: Int { 1 << 10 }

    /// Creates an empty shadow for an owner of at most `capacity` entries.
    ///
    /// The rate is the smallest power of two that keeps the simulated LRU within ``largestSize``.
    @usableFromInline
    init(capacity: Int) {
        var shift = 0
        while shift < 62 && capacity >> shift > Self.largestSize { shift += 1 }
        rateShift = shift
    }

    /// Whether the key is in the sample.
    @inlinable
    func samples(_ hash: UInt64) -> Bool {
        // Bits 24 and up: the frequency sketch's counter choice uses the low 16.
        (hash >> 24) & ((1 << UInt64(rateShift)) - 1) == 0
    }

    /// Requests the key in the simulated LRU of `count >> rateShift` entries (at least one).
    ///
    /// - Parameters:
    ///   - hash: The key's spread hash; the key must be in the sample (``samples(_:)``).
    ///   - count: The owner's number of entries now.
    /// - Returns: Whether the simulated LRU held the key.
    @inlinable
    mutating func access(_ hash: UInt64, count: Int) -> Bool {
        if let node = nodes[hash] {
            makeNewest(node)
            return true
        }
        let size = max(1, count >> rateShift)
        while nodes.count >= size, oldest >= 0 { dropOldest() }
        let node: Int32
        if let free = freeNodes.popLast() {
            node = free
            hashes[Int(node)] = hash
        } else {
            node = Int32(hashes.count)
            hashes.append(hash)
            older.append(-1)
            newer.append(-1)
        }
        nodes[hash] = node
        link(node)
        return false
    }

    @inlinable
    mutating func makeNewest(_ node: Int32) {
        guard node != newest else { return }
        unlink(node)
        link(node)
    }

    @inlinable
    mutating func dropOldest() {
        let node = oldest
        unlink(node)
        nodes[hashes[Int(node)]] = nil
        freeNodes.append(node)
    }

    /// Makes `node` the newest.
    @inlinable
    mutating func link(_ node: Int32) {
        older[Int(node)] = newest
        newer[Int(node)] = -1
        if newest >= 0 { newer[Int(newest)] = node } else { oldest = node }
        newest = node
    }

    @inlinable
    mutating func unlink(_ node: Int32) {
        let before = older[Int(node)]
        let after = newer[Int(node)]
        if before >= 0 { newer[Int(before)] = after } else { oldest = after }
        if after >= 0 { older[Int(after)] = before } else { newest = before }
    }
}
