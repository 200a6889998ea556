extension CacheLevel {
    /// Returns the values found for `keys`, in the order of the keys, reading them concurrently.
    ///
    /// A key whose `get` fails (a miss or any other error) is left out, so the result may be shorter
    /// than `keys`. Cancelling the calling task cancels the gets still running.
    ///
    /// - Parameter keys: The keys to look up; a repeated key is read once per occurrence.
    /// - Returns: The values found, in key order.
    /// - Throws: `CancellationError` when the calling task is cancelled; never a miss.
    public func batchGetSome(_ keys: [Key]) async throws -> [Value] {
        let found = await withTaskGroup(of: (Int, Value?).self) { group in
            for (position, key) in keys.enumerated() {
                group.addTask { (position, try? await self.get(key)) }
            }
            var found = [Value?](repeating: nil, count: keys.count)
            for await (position, value) in group { found[position] = value }
            return found
        }
        try Task.checkCancellation()
        return found.compactMap { $0 }
    }

    /// Returns a level whose keys are lists of keys and whose values are the lists of their values.
    ///
    /// - `get` reads every key concurrently and returns the values in key order. The first failure
    ///   fails the batch with that key's error and cancels the gets still running.
    /// - `set` stores `values[i]` under `keys[i]`, concurrently; a key given more than once keeps its
    ///   last value, as a loop of sets would leave it, and so do two keys that this level maps to one
    ///   (through `transformKeys(_:)` or ``Cache/keyed(_:)``). It throws ``CacheError`` with code
    ///   `invalidConfiguration` when the counts differ, and otherwise the first error a set throws.
    /// - `removeValue` removes every key; `clear` and `onMemoryWarning` pass through.
    ///
    /// - Returns: The batch level.
    public func allBatch() -> BasicCache<[Key], [Value]> {
        BasicCache(
            get: { keys in
                try await withThrowingTaskGroup(of: (Int, Value).self) { group in
                    for (position, key) in keys.enumerated() {
                        group.addTask { (position, try await self.get(key)) }
                    }
                    var values = [Value?](repeating: nil, count: keys.count)
                    // The first error leaves the group, which cancels the children still running.
                    for try await (position, value) in group { values[position] = value }
                    return values.compactMap { $0 }
                }
            },
            set: { values, keys in try await self.batchSet(values, forKeys: keys) },
            removeValue: { keys in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for key in keys {
                        group.addTask { try await self.removeValue(forKey: key) }
                    }
                    try await group.waitForAll()
                }
            },
            clear: { await self.clear() },
            onMemoryWarning: { self.onMemoryWarning() }
        )
    }

    /// Stores `values[i]` under `keys[i]`, concurrently: the `set` of ``allBatch()``, and of the
    /// batch levels that other modules of the package build their own way.
    ///
    /// A key given more than once (by `==`, so two spellings of one string are one key, or two keys
    /// that this level maps to one key below it, see ``KeyMappingLevel``) keeps its last value: made at
    /// once, its sets could land in any order. Only the last is made; keys that are not `Hashable`
    /// (or that map to keys that are not), and keys not equal to themselves (`Double.nan`), are set
    /// one after another instead, in order. A key whose
    /// mapping throws is its own: its set throws that error.
    ///
    /// - Parameters:
    ///   - values: The values, one per key.
    ///   - keys: The keys.
    /// - Throws: ``CacheError`` with code `invalidConfiguration` when the counts differ, and otherwise
    ///   the first error a set throws.
    /// - Complexity: O(n) besides the sets, for n keys, and one mapping of each key, one after
    ///   another, for a level that maps its keys.
    package func batchSet(_ values: [Value], forKeys keys: [Key]) async throws {
        guard values.count == keys.count else {
            throw CacheError.invalidConfiguration(
                "A batch set needs one value per key (\(values.count) values for \(keys.count) keys)."
            )
        }
        guard let positions = await lastPositionOfEachKey(keys) else {
            for (value, key) in zip(values, keys) { try await set(value, forKey: key) }
            return
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for position in positions {
                let (value, key) = (values[position], keys[position])
                group.addTask { try await self.set(value, forKey: key) }
            }
            try await group.waitForAll()
        }
    }

    /// The positions of the last occurrence of each key in `keys`, in order, by what each is stored
    /// under; `nil` when a key is not `Hashable` or not equal to itself, so that its repeats cannot be
    /// found.
    private func lastPositionOfEachKey(_ keys: [Key]) async -> [Int]? {
        var hashables: [StoredKey] = []
        hashables.reserveCapacity(keys.count)
        let keyMapping = keyMapping
        for (position, key) in keys.enumerated() {
            guard let keyMapping else {
                guard let hashable = StoredKey(key) else { return nil }
                hashables.append(hashable)
                continue
            }
            do {
                guard let stored = try await keyMapping(key) else { return nil }
                hashables.append(stored)
            } catch {
                // Its set throws what mapping it threw, whatever the other keys are.
                hashables.append(StoredKey(unmappedAt: position))
            }
        }
        // A key not equal to itself (`Double.nan`) has repeats that no table finds, and the level may
        // still store them as one.
        guard hashables.allSatisfy(\.isReflexive) else { return nil }
        // Two keys one in some level of a composite and apart in another: the level that keeps them
        // apart needs each value, and the one that makes them one the later, so neither may be left
        // out nor set at once with the other.
        guard overlapOnlyWhenEqual(hashables) else { return nil }
        var last: [StoredKey: Int] = [:]
        last.reserveCapacity(keys.count)
        for (position, key) in hashables.enumerated() { last[key] = position }
        return hashables.indices.filter { last[hashables[$0]] == $0 }
    }
}

/// Whether every two keys of a composite that are one key in some level are one in every level
/// (see ``StoredKey/overlaps(_:)``); `true` for keys of one level.
///
/// - Complexity: O(n × l) for n keys of l levels.
private func overlapOnlyWhenEqual(_ keys: [StoredKey]) -> Bool {
    var keyOfLevelKey: [StoredKey.LevelKey: StoredKey] = [:]
    for key in keys where key.isJoined {
        for levelKey in key.levelKeysByLevel {
            if let other = keyOfLevelKey.updateValue(key, forKey: levelKey), other != key { return false }
        }
    }
    return true
}
