// Saving and restoring the order of an `EvictionIndex`: the disk store writes the entries in eviction
// order with their access counts to `.hoard-index`, and a later process appends them in that order to
// an empty index, which then evicts them in the same order.

extension EvictionIndex {
    /// Every entry with its access count, in eviction order (the next victim first).
    ///
    /// Appending them to an empty index in this order with ``append(_:forKey:count:hash:)`` restores
    /// the same order.
    ///
    /// - Complexity: O(n).
    @usableFromInline
    var entriesInEvictionOrder: [(key: Key, payload: Payload, count: UInt32)] {
        slotsInEvictionOrder.map { (entries[Int($0.slot)].key, entries[Int($0.slot)].payload, $0.count) }
    }

    /// The slot of every entry with its access count, in eviction order (the next victim first): for
    /// an owner that reads more of each entry than its key and payload (its tag, see ``tags``).
    ///
    /// - Complexity: O(n).
    @usableFromInline
    var slotsInEvictionOrder: [(slot: Int32, count: UInt32)] {
        if policy == .wTinyLFU { return admissionSlotsInEvictionOrder }
        var result: [(slot: Int32, count: UInt32)] = []
        result.reserveCapacity(entries.count)
        var bucket = firstBucket
        while bucket >= 0 {
            let count = lists[Int(bucket)].accessCount
            var slot = lists[Int(bucket)].head
            while slot >= 0 {
                result.append((slot, count))
                slot = links[Int(slot)].next
            }
            bucket = lists[Int(bucket)].next
        }
        return result
    }

    /// Adds an entry as the most recently used one with the given access count.
    ///
    /// This is not an access; it restores a saved order. An existing entry for `key` is replaced.
    /// `hash` is `key.hashValue`, or the hash the owner passes for the key to every call.
    ///
    /// - Complexity: O(1) when the entries come in the order of ``entriesInEvictionOrder``.
    @usableFromInline
    mutating func append(_ payload: Payload, forKey key: Key, count: UInt32, hash: Int? = nil) {
        makeUnique()
        let hash = hash ?? key.hashValue
        if let slot = slot(for: key, hash: hash) { remove(slot: slot) }
        appendNew(payload, forKey: key, count: count, hash: hash)
    }

    /// ``append(_:forKey:count:hash:)`` for a key the index does not hold, without looking it up:
    /// for an owner that appends keys it knows to be distinct (the names of a folder's files).
    ///
    /// - Complexity: O(1) when the entries come in the order of ``entriesInEvictionOrder``.
    @usableFromInline
    mutating func appendNew(_ payload: Payload, forKey key: Key, count: UInt32, hash: Int) {
        makeUnique()
        if policy == .wTinyLFU {
            appendToProbation(key: key, hash: hash, payload: payload, count: count)
            return
        }
        insertNew(key: key, hash: hash, payload: payload, count: policy == .lru ? 1 : max(1, count), cost: 0)
    }

    /// Makes room for `capacity` entries in all, so that adding up to that many grows neither the
    /// entries' buffers nor the table: for an owner about to append many entries at once. (Under
    /// W-TinyLFU the frequency sketch still grows with the count, as it does otherwise.)
    ///
    /// - Parameters:
    ///   - capacity: The entries the index is about to hold.
    ///   - headroom: More room in the entries' buffers (not the table), for the entries that may
    ///     come after: room never written takes no resident memory, unlike the table's cells, which
    ///     are zeroed when made.
    /// - Complexity: O(n) in the entries and the table's cells.
    @usableFromInline
    mutating func reserveCapacity(_ capacity: Int, headroom: Int = 0) {
        makeUnique()
        let (room, overflow) = capacity.addingReportingOverflow(max(0, headroom))
        let buffers = overflow ? capacity : room
        entries.reserveCapacity(buffers)
        links.reserveCapacity(buffers)
        tags.reserveCapacity(buffers)
        table.reserveCapacity(capacity, tags: tags)
    }
}
