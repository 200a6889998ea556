extension CacheLevel {
    /// Returns a level whose failed `get` is recovered by `produceValue`.
    ///
    /// `produceValue` gets the error `get` threw (a miss or any other failure) and returns a value,
    /// which is returned and not stored, or throws. `CancellationError` is not recovered. Writes pass
    /// through.
    ///
    /// - Parameter produceValue: Turns the error of a failed `get` into a value.
    /// - Returns: The recovering level.
    public func fallback(
        with produceValue: @escaping @Sendable (_ error: any Error) async throws -> Value
    ) -> BasicCache<Key, Value> {
        fallback { _, error in try await produceValue(error) }
    }

    /// Returns a level whose failed `get` is recovered by `produceValue`, which sees the key.
    ///
    /// ```swift
    /// let avatars = network.fallback { url, error in try await placeholder(for: url) }
    /// ```
    /// The same as the `fallback(with:)` whose closure sees only the error, for a recovery that
    /// depends on the key.
    ///
    /// - Parameter produceValue: Turns the key and the error of a failed `get` into a value.
    /// - Returns: The recovering level.
    public func fallback(
        with produceValue: @escaping @Sendable (_ key: Key, _ error: any Error) async throws -> Value
    ) -> BasicCache<Key, Value> {
        BasicCache(
            get: { key in
                do {
                    return try await self.get(key)
                } catch {
                    if error is CancellationError { throw error }
                    return try await produceValue(key, error)
                }
            },
            set: { value, key in try await self.set(value, forKey: key) },
            removeValue: { key in try await self.removeValue(forKey: key) },
            clear: { await self.clear() },
            onMemoryWarning: { self.onMemoryWarning() }
        )
        // The keys are this level's: the ones it makes one stay one.
        .mappingKeys(by: keyMapping)
    }

    /// Returns a level whose failed `get` returns `defaultValue`.
    ///
    /// The default value is returned, not stored. `CancellationError` is not recovered.
    ///
    /// - Parameter defaultValue: The value a failed `get` returns.
    /// - Returns: The defaulting level.
    public func defaulting(to defaultValue: Value) -> BasicCache<Key, Value> {
        fallback { _ in defaultValue }
    }

    /// Returns a level with one value, keyed by `Void`, stored under `key` in this level.
    ///
    /// ```swift
    /// let settings = disk.singleKey("settings")
    /// let current = try await settings.get(())
    /// ```
    /// `clear` clears the whole of this level.
    ///
    /// - Parameter key: The key the value lives under.
    /// - Returns: The single-key level.
    public func singleKey(_ key: Key) -> BasicCache<Void, Value> {
        BasicCache(
            get: { _ in try await self.get(key) },
            set: { value, _ in try await self.set(value, forKey: key) },
            removeValue: { _ in try await self.removeValue(forKey: key) },
            clear: { await self.clear() },
            onMemoryWarning: { self.onMemoryWarning() }
        )
    }

    /// Returns a level that reads this one and ignores writes.
    ///
    /// `set`, `removeValue` and `clear` do nothing, so that a read-only level can sit in a
    /// composition whose writes reach every level (`memory.compose(bundled.readOnly())`) without
    /// failing them. `onMemoryWarning` passes through.
    ///
    /// - Returns: The read-only level.
    public func readOnly() -> BasicCache<Key, Value> {
        BasicCache(
            get: { key in try await self.get(key) },
            onMemoryWarning: { self.onMemoryWarning() }
        )
        .mappingKeys(by: keyMapping)
    }
}
