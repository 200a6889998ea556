// Removing values from a `MemoryStore`: one key, the entries a condition picks, or all of them. Each
// removal gives its room back to the shards (see `MemoryStore+Room.swift`).

extension MemoryStore {
    /// Removes the value for `key`; returns it.
    @discardableResult
    func removeValue(forKey key: Key) -> Value? {
        let hash = key.hashValue
        let (removed, mustAnnounce) = withShard(shard(for: hash)) { shard -> (Value?, Bool) in
            guard let value = shard.index.removeValue(forKey: key, hash: hash) else { return (nil, false) }
            return (value, releaseRoom(1))
        }
        if mustAnnounce { announceRoom() }
        return removed
    }

    /// Removes the value for `key` if `condition` holds for it; returns it.
    @discardableResult
    func removeValue(forKey key: Key, if condition: (Value) -> Bool) -> Value? {
        let hash = key.hashValue
        let (removed, mustAnnounce) = withShard(shard(for: hash)) { shard -> (Value?, Bool) in
            guard let value = shard.index.peek(key, hash: hash), condition(value) else { return (nil, false) }
            return (shard.index.removeValue(forKey: key, hash: hash), releaseRoom(1))
        }
        if mustAnnounce { announceRoom() }
        return removed
    }

    /// Removes every entry for which `condition` holds; returns them.
    ///
    /// Takes each shard's lock in turn.
    /// - Complexity: O(n).
    func removeAll(where condition: (Key, Value) -> Bool) -> [(key: Key, value: Value)] {
        var mustAnnounce = false
        let removed = forEachShard { shard in
            var removed: [(key: Key, value: Value)] = []
            for entry in shard.index.entriesInEvictionOrder where condition(entry.key, entry.payload) {
                shard.index.removeValue(forKey: entry.key)
                removed.append((entry.key, entry.payload))
            }
            if releaseRoom(removed.count) { mustAnnounce = true }
            return removed
        }.flatMap { $0 }
        if mustAnnounce { announceRoom() }
        return removed
    }

    /// Removes every value, taking each shard's lock in turn; returns how many there were.
    @discardableResult
    func removeAll() -> Int {
        var mustAnnounce = false
        let count = forEachShard { shard in
            let count = shard.index.count
            shard.index.removeAll()
            if releaseRoom(count) { mustAnnounce = true }
            return count
        }.reduce(0, +)
        if mustAnnounce { announceRoom() }
        return count
    }
}
