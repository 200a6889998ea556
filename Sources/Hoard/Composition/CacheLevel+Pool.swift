extension CacheLevel where Key: Hashable {
    /// Returns a level whose concurrent gets of one key share one get of this level.
    ///
    /// The first `get` of a key starts the underlying get; the ones that arrive while it runs wait for
    /// it, and its value or error reaches every one of them. A waiter whose task is cancelled stops
    /// waiting at once with `CancellationError`, without disturbing the others; when every waiter has
    /// cancelled, the underlying get is cancelled. Nothing is kept once the get completes: pooling
    /// shares work in flight, it does not cache. A get that started before a `set` may still return
    /// the older value; one that starts once a `set` or `removeValue` of its key (or a `clear`) has
    /// returned does not join a get from before it.
    ///
    /// Writes, `clear` and `onMemoryWarning` pass through.
    ///
    /// ```swift
    /// let api = networkLevel.pooled()   // 10 views asking for one image make one request
    /// ```
    /// - Returns: The pooling level.
    public func pooled() -> BasicCache<Key, Value> {
        pooled(sharing: SharedFlights<Key, Value>())
    }

    /// The same as ``pooled()``, with the table of gets in flight given, so that tests can watch it.
    func pooled(sharing flights: SharedFlights<Key, Value>) -> BasicCache<Key, Value> {
        BasicCache(
            get: { key in try await flights.value(forKey: key) { try await self.get(key) } },
            // A get that begins once a write has returned must not join a read from before it.
            set: { value, key in
                defer { flights.retire(key) }
                try await self.set(value, forKey: key)
            },
            removeValue: { key in
                defer { flights.retire(key) }
                try await self.removeValue(forKey: key)
            },
            clear: {
                await self.clear()
                flights.retireAll()
            },
            onMemoryWarning: { self.onMemoryWarning() }
        )
    }
}
