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
        await leases.acquire(forKey: key.canonicalKey) { [self] () async -> Result<Fetched?, CacheError> in
            // A set in this process may have stored the value meanwhile.
            if let memory, let cached = memory.peek(key), !cached.isExpired(at: { engine.now }) {
                return .success(Fetched(result: .success(cached.value), outcome: outcome))
            }
            // Taken again before each read: the holder's write, announced by an invalidation, has
            // changed the key since the first read.
            let token = engine.stripes.beginFill(key.hashValue)
            defer { engine.stripes.endFill(token) }
            switch await engine.readShared(key) {
            case .hit(let cached, let serialized):
                var filled = outcome
                fill(cached, serialized: serialized, forKey: key, ifUnchangedSince: token, into: &filled)
                return .success(Fetched(result: .success(cached.value), outcome: filled))
            case .miss:
                return .success(nil)
            case .failed(let error):
                reporter.didFailOnShared(key, error, isWrite: false)
                return .failure(error)
            }
        }
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
