// Saving and restoring the order of an `EvictionIndex`.

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
            let count = buckets[Int(bucket)].count
            var slot = buckets[Int(bucket)].head
            while slot >= 0 {
                result.append((entries[Int(slot)].key, entries[Int(slot)].payload, count))
                slot = links[Int(slot)].next
            }
            bucket = buckets[Int(bucket)].next
        }
        return result
    }

    /// Adds an entry as the most recently used one with the given access count.
    ///
    /// This is not an access; it restores a saved order. An existing entry for `key` is replaced.
    @usableFromInline
    mutating func append(_ payload: Payload, forKey key: Key, count: UInt32) {
        let hash = key.hashValue
        if let slot = slot(for: key, hash: hash) { remove(slot: slot) }
        if policy == .wTinyLFU {
            appendToProbation(key: key, hash: hash, payload: payload, count: count)
            return
        }
        insertNew(key: key, hash: hash, payload: payload, count: policy == .lru ? 1 : max(1, count), cost: 0)
    }
}
