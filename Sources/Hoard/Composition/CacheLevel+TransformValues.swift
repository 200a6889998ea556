extension CacheLevel {
    /// Returns a level that stores values of another type, converting them both ways.
    ///
    /// `get` transforms what this level returns: a value that does not transform is a miss
    /// (``CacheError`` with code `notFound`, carrying the transformer's error). `set` stores the
    /// inverse transform of the value and throws when it fails.
    ///
    /// - Parameter transformer: Converts this level's values into the new ones and back.
    /// - Returns: The level with the new values.
    public func transformValues<NewValue: Sendable>(
        _ transformer: TwoWayTransformer<Value, NewValue>
    ) -> BasicCache<Key, NewValue> {
        conditionedValueTransformation(
            transform: { _, value in try await transformer.transform(value) },
            inverseTransform: { _, newValue in try await transformer.inverseTransform(newValue) }
        )
    }

    /// Returns a level that stores values of another type, converting them both ways with
    /// transformations that also see the key.
    ///
    /// `get` transforms what this level returns: a value that does not transform is a miss
    /// (``CacheError`` with code `notFound`, carrying the transformation's error). `set` stores the
    /// inverse transform of the value and throws when it fails.
    ///
    /// - Parameters:
    ///   - transform: Converts a value of this level, stored under a key, into a new value.
    ///   - inverseTransform: Converts a new value, set under a key, into a value of this level.
    /// - Returns: The level with the new values.
    public func conditionedValueTransformation<NewValue: Sendable>(
        transform: @escaping @Sendable (_ key: Key, _ value: Value) async throws -> NewValue,
        inverseTransform: @escaping @Sendable (_ key: Key, _ value: NewValue) async throws -> Value
    ) -> BasicCache<Key, NewValue> {
        BasicCache(
            get: { key in
                let value = try await self.get(key)
                do {
                    return try await transform(key, value)
                } catch {
                    throw TransformFailure.miss(error, transforming: "the value for key \(key)")
                }
            },
            set: { newValue, key in
                try await self.set(inverseTransform(key, newValue), forKey: key)
            },
            removeValue: { key in try await self.removeValue(forKey: key) },
            clear: { await self.clear() },
            onMemoryWarning: { self.onMemoryWarning() }
        )
        // The keys are this level's: the ones it makes one stay one.
        .mappingKeys(by: keyMapping)
    }

    /// Returns a level whose `get` passes what it finds through `transformer`.
    ///
    /// Writes pass through unchanged. A value that does not transform is a miss (``CacheError`` with
    /// code `notFound`, carrying the transformer's error).
    ///
    /// - Parameter transformer: Applied to every value `get` returns.
    /// - Returns: The post-processing level.
    public func postProcess(_ transformer: OneWayTransformer<Value, Value>) -> BasicCache<Key, Value> {
        conditionedPostProcess { _, value in try await transformer.transform(value) }
    }

    /// Returns a level whose `get` passes what it finds through `transform`, which also sees the key.
    ///
    /// Writes pass through unchanged. A value that does not transform is a miss (``CacheError`` with
    /// code `notFound`, carrying the transformation's error).
    ///
    /// - Parameter transform: Applied to every value `get` returns, with its key.
    /// - Returns: The post-processing level.
    public func conditionedPostProcess(
        _ transform: @escaping @Sendable (_ key: Key, _ value: Value) async throws -> Value
    ) -> BasicCache<Key, Value> {
        conditionedValueTransformation(transform: transform, inverseTransform: { _, value in value })
    }
}
