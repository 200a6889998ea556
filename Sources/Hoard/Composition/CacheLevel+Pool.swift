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
    /// Over a level that maps two keys to one (`transformKeys(_:)`, ``Cache/keyed(_:)``), the two are
    /// one key here too: their gets share one get, and a write of either parts both from a get from
    /// before it. A key not equal to itself (`Double.nan`) is no key's twin: its gets are not shared.
    ///
    /// ```swift
    /// let api = networkLevel.pooled()   // 10 views asking for one image make one request
    /// ```
    /// - Returns: The pooling level.
    public func pooled() -> BasicCache<Key, Value> {
        guard keyMapping != nil else { return pooled(sharing: SharedFlights<Key, Value>()) }
        return pooled(sharingByStoredKey: SharedFlights<StoredKey, Value>())
    }

    /// The same as ``pooled()`` over a level that maps its keys, with the table of gets in flight
    /// given, so that tests can watch it.
    ///
    /// Its flights go by what each key is stored under, so that the keys the mapping makes one share
    /// them.
    ///
    /// - Parameter flights: The table of gets in flight.
    /// - Returns: The pooling level.
    func pooled(sharingByStoredKey flights: SharedFlights<StoredKey, Value>) -> BasicCache<Key, Value> {
        let keyMapping = keyMapping
        return pooled(
            sharing: flights,
            by: { key in
                do {
                    let stored = try await keyMapping?(key) ?? StoredKey(key)
                    return stored?.isReflexive == true ? stored : nil
                } catch {
                    return nil
                }
            },
            // A composite's key is one with others in some of its levels only: a write of it parts
            // from older gets every key it is one with in any level.
            retiring: { key in
                if key.isJoined {
                    flights.retire { $0.overlaps(key) }
                } else {
                    flights.retire(key)
                }
            }
        )
    }

    /// The same as ``pooled()``, with the table of gets in flight given, so that tests can watch it.
    ///
    /// - Parameter flights: The table of gets in flight.
    /// - Returns: The pooling level.
    func pooled(sharing flights: SharedFlights<Key, Value>) -> BasicCache<Key, Value> {
        // A key not equal to itself (`Double.nan`) has a flight no get or write could find again.
        pooled(sharing: flights, by: { $0 == $0 ? $0 : nil }, retiring: { flights.retire($0) })
    }

    /// The same as ``pooled()``, with the table of gets in flight given, and the key of a get's flight.
    ///
    /// - Parameters:
    ///   - flights: The table of gets in flight.
    ///   - flightKey: The key of the flight a get of a key joins, and that a write of it retires;
    ///     `nil` for a key that this level cannot map, or that is not equal to itself, whose get is its
    ///     own (and fails as it would).
    ///   - retire: Retires the flights a write of a key with that flight key parts from older gets.
    /// - Returns: The pooling level.
    func pooled<FlightKey>(
        sharing flights: SharedFlights<FlightKey, Value>,
        by flightKey: @escaping @Sendable (Key) async -> FlightKey?,
        retiring retire: @escaping @Sendable (FlightKey) -> Void
    ) -> BasicCache<Key, Value> {
        BasicCache(
            get: { key in
                guard let shared = await flightKey(key) else { return try await self.get(key) }
                return try await flights.value(forKey: shared) { try await self.get(key) }
            },
            // A get that begins once a write has returned must not join a read from before it.
            set: { value, key in
                let shared = await flightKey(key)
                defer { if let shared { retire(shared) } }
                try await self.set(value, forKey: key)
            },
            removeValue: { key in
                let shared = await flightKey(key)
                defer { if let shared { retire(shared) } }
                try await self.removeValue(forKey: key)
            },
            clear: {
                await self.clear()
                flights.retireAll()
            },
            onMemoryWarning: { self.onMemoryWarning() }
        )
        // The keys are this level's: the ones it makes one stay one.
        .mappingKeys(by: keyMapping)
    }
}
