extension CacheLevel {
    /// Returns a level whose keys are turned into this level's keys by `transformer` first.
    ///
    /// A key the transformer cannot transform is a miss for `get` (``CacheError`` with code
    /// `notFound`, carrying the transformer's error, and a debug log message), a thrown error for
    /// `set`, and nothing to remove for `removeValue`. `clear` and `onMemoryWarning` pass through.
    ///
    /// Two new keys that transform into one key of this level are one key, for the adapters over the
    /// new level too: a batch set (``allBatch()``) of both keeps the later value, and ``pooled()``
    /// treats them as one key. Those adapters transform each key once more to tell, so keep the
    /// transformer pure.
    ///
    /// ```swift
    /// let users = disk.transformKeys(OneWayTransformer<User.ID, String> { "user-\($0)" })
    /// ```
    /// - Parameter transformer: Turns a new key into a key of this level.
    /// - Returns: The level with the new keys.
    public func transformKeys<NewKey: Sendable>(
        _ transformer: OneWayTransformer<NewKey, Key>
    ) -> BasicCache<NewKey, Value> {
        let below = keyMapping
        return BasicCache(
            get: { newKey in
                let key: Key
                do {
                    key = try await transformer.transform(newKey)
                } catch {
                    throw TransformFailure.miss(error, transforming: "the key \(newKey)")
                }
                return try await self.get(key)
            },
            set: { value, newKey in
                try await self.set(value, forKey: transformer.transform(newKey))
            },
            removeValue: { newKey in
                let key: Key
                do {
                    key = try await transformer.transform(newKey)
                } catch {
                    if error is CancellationError { throw error }
                    return
                }
                try await self.removeValue(forKey: key)
            },
            clear: { await self.clear() },
            onMemoryWarning: { self.onMemoryWarning() }
        )
        .mappingKeys { newKey in
            let key = try await transformer.transform(newKey)
            guard let below else { return StoredKey(key) }
            return try await below(key)
        }
    }

    /// Returns a level whose keys are turned into this level's keys by `transform` first.
    ///
    /// The same as the `transformKeys(_:)` that takes a ``OneWayTransformer``, with a closure.
    ///
    /// - Parameter transform: Turns a new key into a key of this level; may throw.
    /// - Returns: The level with the new keys.
    public func transformKeys<NewKey: Sendable>(
        _ transform: @escaping @Sendable (NewKey) async throws -> Key
    ) -> BasicCache<NewKey, Value> {
        transformKeys(OneWayTransformer(transform))
    }
}
