import Foundation

extension Cache {
    /// What a miss does with ``CacheBuilder/fleetSingleFetch(leaseDuration:waitLimit:)`` before it
    /// calls the fetcher: takes the key's lease, or waits for the value of the instance that holds it
    /// (see ``SharedLeases``).
    ///
    /// - Parameters:
    ///   - key: The cache's key.
    ///   - leases: The cache's leases.
    ///   - outcome: What the fetch did so far; a value found is filled in with it.
    /// - Returns: The value found while waiting (filled into disk and memory), the lease taken, or
    ///   neither (fetch without a lease).
    func acquireLease(
        forKey key: String,
        _ leases: SharedLeases,
        outcome: CacheOutcome<Value>
    ) async -> SharedLeases.Acquired<Fetched> {
        let acquired = await leases.acquire(
            forKey: key.canonicalKey,
            lookup: { [self] () async -> Result<LeaseRead?, CacheError> in
                // Taken again before each read: the holder's write, announced by an invalidation, has
                // changed the key since the first read. Ended once the value is filled in, or dropped.
                // Taken before the local look below, so that a change a cache of this process makes
                // after that look is seen by the token, and refuses the fill.
                let token = engine.stripes.beginFill(key.hashValue)
                if let value = liveLocalValue(forKey: key) {
                    engine.stripes.endFill(token)
                    return .success(.memory(value))
                }
                switch await engine.readShared(key) {
                case .hit(let cached, let serialized):
                    return .success(.shared(cached, serialized: serialized, token: token))
                case .miss:
                    engine.stripes.endFill(token)
                    return .success(nil)
                case .failed(let error):
                    engine.stripes.endFill(token)
                    reporter.didFailOnShared(key, error, isWrite: false)
                    return .failure(error)
                }
            },
            dropLate: { [engine] late in
                // A read the wait stopped waiting for: its value is not filled in.
                if case .success(.shared(_, _, let token)?) = late { engine.stripes.endFill(token) }
            }
        )
        switch acquired {
        case .found(.memory(let value)):
            return .found(Fetched(result: .success(value), outcome: outcome))
        case .found(.shared(let cached, let serialized, let token)):
            defer { engine.stripes.endFill(token) }
            var filled = outcome
            fill(cached, serialized: serialized, forKey: key, ifUnchangedSince: token, into: &filled)
            return .found(Fetched(result: .success(cached.value), outcome: filled))
        case .lease(let token):
            return .lease(token: token)
        case .none:
            return .none
        }
    }

    /// A live value for `key` in memory or else on disk, where a set in this process, or another cache
    /// on the container, may have stored it during a lease wait; not an access, and nothing is
    /// removed, as the wait's read may finish alone.
    ///
    /// An expired copy in memory (kept for `serveStaleOnFetchFailure`) does not hide a live file.
    private func liveLocalValue(forKey key: String) -> Value? {
        if let memory, let cached = memory.peek(key), !cached.isExpired(at: { engine.now }) { return cached.value }
        let (cached, _) = engine.readFromDisk(
            forKey: key,
            keepingExpired: true,
            countsAccess: false,
            copiesIntoMemory: false,
            origin: nil
        )
        guard let cached, !cached.isExpired(at: { engine.now }) else { return nil }
        return cached.value
    }

    /// What a read of a lease wait found, before it is filled in.
    enum LeaseRead: Sendable {
        /// A live value in memory or on disk, which a set in this process stored meanwhile.
        case memory(Value)
        /// The shared level's value, read under `token`.
        case shared(CachedValue<Value>, serialized: Data, token: KeyStripes.FillToken)
    }

    /// Puts a value read from the shared level into disk and memory (not back into the shared level)
    /// unless the key changed since `token` was taken, and notes a shared hit.
    func fill(
        _ cached: CachedValue<Value>,
        serialized: Data,
        forKey key: String,
        ifUnchangedSince token: KeyStripes.FillToken,
        into outcome: inout CacheOutcome<Value>
    ) {
        outcome.merge(
            engine.store(
                cached,
                forKey: key,
                ifUnchangedSince: token,
                origin: self,
                toShared: false,
                serialized: serialized
            )
        )
        outcome.stored = nil  // a fill, not a set: no set event
        outcome.read = .hit(.shared)
    }
}
