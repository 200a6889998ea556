extension CacheLevel {
    /// Returns a level that skips this one for the keys that fail `condition`.
    ///
    /// For a skipped key, `get` throws ``CacheError/notFound`` and `set` and `removeValue` do nothing.
    /// `clear` and `onMemoryWarning` always pass through.
    ///
    /// ```swift
    /// let smallImages = memory.conditioned { key in !key.hasSuffix(".mov") }
    /// ```
    /// - Parameter condition: Whether the level handles a key.
    /// - Returns: The conditioned level.
    public func conditioned(_ condition: @escaping @Sendable (_ key: Key) async -> Bool) -> BasicCache<Key, Value> {
        BasicCache(
            get: { key in
                guard await condition(key) else { throw CacheError.refused(key: "\(key)") }
                return try await self.get(key)
            },
            set: { value, key in
                guard await condition(key) else { return }
                try await self.set(value, forKey: key)
            },
            removeValue: { key in
                guard await condition(key) else { return }
                try await self.removeValue(forKey: key)
            },
            clear: { await self.clear() },
            onMemoryWarning: { self.onMemoryWarning() }
        )
        // The keys are this level's: the ones it makes one stay one.
        .mappingKeys(by: keyMapping)
    }

    /// Erases the level's type to ``BasicCache``.
    ///
    /// A `BasicCache` is returned as it is, even when only its `CacheLevel` type is known.
    ///
    /// - Returns: The level as a `BasicCache`.
    public func normalize() -> BasicCache<Key, Value> {
        BasicCache(self)
    }
}
