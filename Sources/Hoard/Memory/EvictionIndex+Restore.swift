// Saving and restoring the order of an `EvictionIndex`: the disk store writes the entries in eviction
// order with their access counts to `.hoard-index`, and a later process appends them in that order to
// an empty index, which then evicts them in the same order.

extension EvictionIndex {
    /// Every entry with its access count, in eviction order (the next victim first).
    ///
    /// Appending them to an empty index in this order with ``append(_:forKey:count:)`` restores the
    /// same order.
    ///
    /// - Complexity: O(n).
    @usableFromInline
    var entriesInEvictionOrder: [(key: Key, payload: Payload, count: UInt32)] {
        if policy == .wTinyLFU { return admissionEntriesInEvictionOrder }
        var result: [(key: Key, payload: Payload, count: UInt32)] = []
        result.reserveCapacity(entries.count)
        var bucket = firstBucket
        while bucket >= 0 {
            let count = lists[Int(bucket)].accessCount
            var slot = lists[Int(bucket)].head
            while slot >= 0 {
                result.append((entries[Int(slot)].key, entries[Int(slot)].payload, count))
                slot = links[Int(slot)].next
            }
            bucket = lists[Int(bucket)].next
        }
        return result
    }

    /// Adds an entry as the most recently used one with the given access count.
    ///
    /// This is not an access; it restores a saved order. An existing entry for `key` is replaced.
    ///
    /// - Complexity: O(1) when the entries come in the order of ``entriesInEvictionOrder``.
    @usableFromInline
    mutating func append(_ payload: Payload, forKey key: Key, count: UInt32) {
        makeUnique()
        let hash = key.hashValue
        if let slot = slot(for: key, hash: hash) { remove(slot: slot) }
        if policy == .wTinyLFU {
            appendToProbation(key: key, hash: hash, payload: payload, count: count)
            return
        }
        insertNew(key: key, hash: hash, payload: payload, count: policy == .lru ? 1 : max(1, count), cost: 0)
    }
}
