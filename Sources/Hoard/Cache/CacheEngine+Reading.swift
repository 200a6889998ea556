import Foundation

extension CacheEngine {
    /// The disk half of a read: a pending write, else the entry file; a live value is copied into
    /// memory.
    ///
    /// - Parameters:
    ///   - key: The key to read.
    ///   - copiesIntoMemory: Whether a live value is copied into memory (not from a memory-eviction
    ///     callback: the copy would evict another entry, whose callback could read it back, and so on).
    ///   - origin: The cache reading, which removing an expired pending write is reported to.
    /// - Returns: The live value, and what happened: a disk hit or a miss, the evictions.
    @inlinable
    func valueFromDisk(
        forKey key: String,
        copiesIntoMemory: Bool,
        origin: (any DiskStoreObserver)?
    ) -> (Value?, CacheOutcome<Value>) {
        let (cached, outcome) = readFromDisk(
            forKey: key,
            keepingExpired: servesStaleOnFetchFailure,
            countsAccess: true,
            copiesIntoMemory: copiesIntoMemory,
            origin: origin,
            readOnHit: .hit(.disk)
        )
        if let live = cached, !live.isExpired(at: { now }) { return (live.value, outcome) }
        var missed = outcome
        missed.read = .miss
        return (nil, missed)
    }

    /// Reads `key` from the disk level; copies a live value into memory.
    ///
    /// An expired value is removed from disk (an eviction with reason ``EvictionReason/expired``)
    /// unless `keepingExpired`, which returns it instead.
    ///
    /// - Parameters:
    ///   - key: The key to read.
    ///   - keepingExpired: Whether an expired entry is decoded and returned (for stale values) rather
    ///     than removed.
    ///   - countsAccess: Whether the read is an access (copied into memory, counted for eviction).
    ///   - copiesIntoMemory: Whether a live value read as an access goes into memory.
    ///   - origin: The cache reading.
    ///   - readOnHit: What the returned outcome's read says when a value is found and nothing
    ///     else happened (no removal, no news for other caches).
    /// - Returns: The value, live or, with `keepingExpired`, expired; and what happened.
    @inlinable
    func readFromDisk(
        forKey key: String,
        keepingExpired: Bool,
        countsAccess: Bool,
        copiesIntoMemory: Bool,
        origin: (any DiskStoreObserver)?,
        readOnHit: CacheOutcome<Value>.Read? = nil
    ) -> (CachedValue<Value>?, CacheOutcome<Value>) {
        // `disk!` at each use, not a `let` binding, which would retain the store: the weak
        // reference of the registry of shared stores sends each retain of it down the runtime's
        // slow path, a few percent of a disk hit.
        guard disk != nil else { return (nil, CacheOutcome(key: key)) }
        let diskKey = DiskKey(key)
        let hash = key.hashValue
        // A coherent cache's disk serves nothing while the gate is closed or a clear is under way.
        let coherence = coherence
        let (changes, servesDisk) = stripes.changes(hash) { coherence?.servesDisk ?? true }
        guard servesDisk else { return (nil, CacheOutcome(key: key)) }
        let serializer = serializer
        let read = disk!.read(
            diskKey,
            now: { now },
            keepingExpired: keepingExpired,
            countsAccess: countsAccess,
            deserialize: { try serializer.deserialize($0) }
        )
        let cached: CachedValue<Value>
        var cost: Int?
        switch read {
        case .miss:
            return (nil, CacheOutcome(key: key))
        case .expired(.pending):
            var outcome = CacheOutcome<Value>(key: key)
            // Only if nothing changed the key since the lookup: the pending value is then this one.
            let news = stripes.ifUnchanged(hash, since: changes) {
                disk!.enqueueRemove(diskKey, observer: origin)
            }
            if let news {
                outcome.tell(news)
                outcome.diskEvictions = [(key, .expired)]
            }
            return (nil, outcome)
        case .expired(.stored(let payload, let expiresAt)):
            var outcome = CacheOutcome<Value>(key: key)
            if disk!.removeExpired(diskKey, payload: payload, expiresAt: expiresAt) {
                outcome.diskEvictions = [(key, .expired)]
            }
            return (nil, outcome)
        case .found(let found, let size):
            cached = found
            cost = size
        }
        if ramCost != nil, cost == nil, let pending = try? serializer.serialize(cached.value) {
            cost = pending.count
        }
        // Copy into memory unless the key changed meanwhile (memory would keep a stale value).
        var memoryEvictions: [CacheOutcome<Value>.Eviction] = []
        if countsAccess, copiesIntoMemory, memory != nil, !cached.isExpired(at: { now }) {
            var isKept = true
            let copied = stripes.ifUnchanged(hash, since: changes) { () -> [Eviction]? in
                // Nothing is copied while the coherence gate is closed (see `CoherenceGate`).
                if let coherence, !coherence.servesDisk { return nil }
                let inserted = insertIntoMemory(cached, forKey: key, cost: cost)
                isKept = inserted.isKept
                return inserted.evicted
            }
            memoryEvictions = copied ?? []
            if !isKept { logNotKept(key, cost: cost) }
        }
        // Made here rather than changed in place: the outcome is large, and returning a variable
        // that was written made the optimizer copy it and destroy the original, a dozen reference
        // counts on every disk hit.
        return (cached, CacheOutcome(key: key, read: readOnHit, memoryEvictions: memoryEvictions))
    }

    /// The entry for a key with its expiry, expired or not; not an access, and nothing is removed.
    func entry(forKey key: String) -> CacheEntry<Value>? {
        if let cached = memory?.peek(key) { return entry(cached, level: .memory) }
        let (cached, _) = readFromDisk(
            forKey: key,
            keepingExpired: true,
            countsAccess: false,
            copiesIntoMemory: false,
            origin: nil
        )
        return cached.map { entry($0, level: .disk) }
    }

    private func entry(_ cached: CachedValue<Value>, level: StorageLevel) -> CacheEntry<Value> {
        CacheEntry(
            value: cached.value,
            expiresAt: cached.expiresAt.date,
            isExpired: cached.isExpired(at: { now }),
            level: level
        )
    }

    /// Whether the disk level may hold a live value for a key: what its index says, or `true` while
    /// the index loads (it is not waited for); not an access, and no file is read.
    func diskMayHoldLiveValue(forKey key: String) -> Bool {
        guard let disk else { return false }
        let now = now
        return disk.containsIfLoaded(DiskKey(key)) { !$0.isExpired(at: now) } ?? true
    }

    /// Whether either level holds a live value for a key that a read would return; not an access,
    /// and no file is read.
    ///
    /// The disk of a coherent cache counts only while it serves reads (see
    /// ``CoherenceGate/servesDisk``): until tracking is confirmed, from a loss to the next
    /// confirmation with the local copies bypassed, and while a disk clear is under way, its entries
    /// may predate a change that went unannounced, and a read does not return them.
    func contains(_ key: String) -> Bool {
        let now = now
        if let cached = memory?.peek(key), !cached.expiresAt.isExpired(at: now) { return true }
        guard let disk, servesDisk(key.hashValue) else { return false }
        return disk.contains(DiskKey(key)) { !$0.isExpired(at: now) }
    }

    /// Every key either level holds a live value for that a read would return, each once, memory's
    /// first; the disk's only while it serves reads, as for ``contains(_:)``.
    ///
    /// - Complexity: O(n) in the number of entries; no file is read.
    var allKeys: [String] {
        let now = now
        var seen = Set<String>()
        var keys: [String] = []
        let inMemory = memory?.keys { !$0.expiresAt.isExpired(at: now) } ?? []
        let onDisk = servesDisk(0) ? disk?.allKeys { !$0.isExpired(at: now) } ?? [] : []
        for key in inMemory + onDisk where seen.insert(key).inserted {
            keys.append(key)
        }
        return keys
    }

    /// Whether the disk level serves reads now: `true` unless coherence closed it (read under the
    /// stripe of `hash`, as a read does).
    private func servesDisk(_ hash: Int) -> Bool {
        guard let coherence else { return true }
        return stripes.changes(hash) { coherence.servesDisk }.1
    }
}
