import Foundation

/// The work of a ``Cache``: its memory and disk levels, kept consistent per key, with expiry and cost.
///
/// The engine owns the memory store, the disk store, the key stripes, the serializer, the clock, the
/// default expiry and the memory cost budget. Its slow-path methods change the levels and return a
/// ``CacheOutcome``: what was evicted, hit or missed, stored or not, and which other caches on the
/// container must hear of it. It never calls a delegate, emits an event, counts a statistic or tells
/// another cache: ``CacheReporter`` does, once every lock is released.
///
/// A value type of references and constants, stored inline in its cache, so that the inlinable
/// memory-hit path reaches the memory store with one load, as if the cache held it itself.
@usableFromInline
struct CacheEngine<Value: Sendable>: Sendable {
    @usableFromInline typealias Eviction = CacheOutcome<Value>.Eviction

    @usableFromInline let memory: MemoryStore<String, CachedValue<Value>>?
    @usableFromInline let disk: DiskStore?
    @usableFromInline let stripes = KeyStripes()
    @usableFromInline let serializer: any CacheSerializer<Value>
    /// Where "now" comes from.
    @usableFromInline let clock: @Sendable () -> Date
    /// The expiry of values set without one.
    @usableFromInline let defaultExpiry: CacheExpiry
    /// Whether a failed fetch returns the expired value, which reads then keep instead of removing.
    @usableFromInline let servesStaleOnFetchFailure: Bool
    /// The memory cost budget and the most one entry may cost, when `maxRamCost` is set.
    @usableFromInline let ramCost: (limit: Int, entryLimit: Int)?
    /// The shared level under disk (a Redis server several instances use), if there is one.
    @usableFromInline let shared: SharedLevel?
    /// The schema version the entries (on disk and on the shared level) are written under.
    let schemaVersion: UInt32
    /// How the local levels keep in step with the shared level, when ``CacheBuilder/coherence(_:)``
    /// is set.
    @usableFromInline let coherence: CoherenceGate?

    init(
        configuration: CacheBuilder<Value>,
        memory: MemoryStore<String, CachedValue<Value>>?,
        disk: DiskStore?,
        shared: SharedLevel?
    ) {
        self.memory = memory
        self.disk = disk
        self.shared = shared
        coherence = configuration.coherence.map(CoherenceGate.init)
        schemaVersion = UInt32(clamping: max(0, configuration.version))
        serializer = configuration.serializer
        clock = configuration.clock
        defaultExpiry = configuration.expiry
        servesStaleOnFetchFailure = configuration.servesStaleOnFetchFailure
        ramCost = configuration.maxRamCost.map { limit in
            (limit, Int((Double(limit) * configuration.maxRamEntryShare).rounded(.down)))
        }
    }

    /// Now, in seconds since 1970, from the builder's clock.
    @usableFromInline
    var now: Double { clock().timeIntervalSince1970 }

    // MARK: - Memory

    /// Handles a memory read that found an expired value: not a hit, and removed unless stale values
    /// are kept.
    @usableFromInline
    func expiredInMemory(_ cached: CachedValue<Value>, forKey key: String) -> CacheOutcome<Value> {
        var outcome = CacheOutcome<Value>(key: key)
        guard let memory else { return outcome }
        memory.uncountHit(forKey: key)
        guard !servesStaleOnFetchFailure else { return outcome }
        // Only if still expired: a set may have replaced it meanwhile.
        let now = now
        if let removed = memory.removeValue(forKey: key, if: { $0.expiresAt.isExpired(at: now) }) {
            outcome.memoryEvictions = [(key, removed.value, .expired)]
        }
        return outcome
    }

    /// Puts a value in memory, within the count limit and, with `maxRamCost`, the cost limits.
    ///
    /// Call it under the key's stripe. A value whose cost is above the per-entry limit is not kept
    /// (the older value of its key is dropped).
    /// - Returns: The entries evicted to make room, and whether the value was kept.
    @usableFromInline
    func insertIntoMemory(
        _ cached: CachedValue<Value>,
        forKey key: String,
        cost: Int?
    ) -> (evicted: [Eviction], isKept: Bool) {
        guard let memory else { return ([], false) }
        guard let ramCost else {
            guard let evicted = memory.set(cached, forKey: key) else { return ([], true) }
            return ([(evicted.key, evicted.value.value, .capacity)], true)
        }
        let outcome = memory.set(
            cached,
            forKey: key,
            cost: cost ?? 0,
            costLimit: ramCost.limit,
            entryCostLimit: ramCost.entryLimit
        )
        return (outcome.evicted.map { ($0.key, $0.value.value, $0.reason) }, outcome.isKept)
    }

    /// Logs that a value was too costly to keep in memory; call it outside the stripe.
    @usableFromInline
    func logNotKept(_ key: String, cost: Int?) {
        guard let ramCost else { return }
        HoardLogger.log(
            .debug,
            "Not keeping \"\(key.prefix(100))\" in memory: it costs \(cost ?? 0) bytes, more than "
                + "\(ramCost.entryLimit) (the share of maxRamCost one entry may take)."
        )
    }

    // MARK: - Writing

    /// Queues the disk write and updates memory as one step under the key's stripe.
    ///
    /// - Parameters:
    ///   - cached: The value to store, with its expiry.
    ///   - key: Its key.
    ///   - fill: For a fill (a value read from the shared level or fetched), what it noted when it
    ///     began: nothing is stored if the key changed since (a fetch that started before a set, a
    ///     removal or an invalidation must not undo it).
    ///   - origin: The cache storing it, which the disk store reports the write's fate to.
    ///   - whenOnDisk: For a save: told, from the writer, once the value is in its file (see
    ///     `DiskStore.enqueueWrite(_:value:observer:completion:)`). Not called when the value is not
    ///     stored at all: the outcome then carries the serializer's failure.
    ///   - toShared: Whether the value also goes to the shared level (not when it came from there).
    ///   - whenShared: For a save: told once the shared level has the value.
    ///   - serialized: The value's serialized bytes when the caller has them (a value read from the
    ///     shared level), so that neither the cost limit nor the disk write serializes it again.
    ///   - lease: The token of the lease this cache holds on the key (a fetched value, see
    ///     ``SharedLeases``): the shared level stores the value only if the lease still holds.
    /// - Returns: What happened: the value stored (or the serializer's failure), the memory
    ///   evictions, the other caches to tell.
    func store(
        _ cached: CachedValue<Value>,
        forKey key: String,
        ifUnchangedSince fill: KeyStripes.FillToken?,
        origin: (any DiskStoreObserver)?,
        whenOnDisk: DiskStore.Completion? = nil,
        toShared: Bool = true,
        whenShared: SharedLevel.Completion? = nil,
        serialized: Data? = nil,
        lease: String? = nil
    ) -> CacheOutcome<Value> {
        let value = cached.value
        let serializer = serializer
        var data = serialized
        if ramCost != nil, data == nil {
            // The memory cost is the serialized size: serialize now, and hand the bytes to the writer.
            LockOrder.assertNoneHeld("calling the serializer")
            do {
                data = try serializer.serialize(value)
            } catch {
                return didFailToSerialize(
                    key: key,
                    ifUnchangedSince: fill,
                    error: error,
                    origin: origin,
                    // A fetched value under a lease: the lease was taken on a miss, so the shared
                    // level holds nothing older (a write of another instance there is newer).
                    fromShared: toShared && lease == nil
                )
            }
        }
        // The local copy lives at most the coherence's maximum local age; the shared level keeps the
        // value's own expiry.
        var local = cached
        if let coherence { local.expiresAt = coherence.localExpiry(cached.expiresAt, now: now) }
        let pending = disk.map { _ in
            (
                key: DiskKey(key),
                value: PendingValue(
                    value: value,
                    serialize: { [data] in try data ?? serializer.serialize(value) },
                    expiresAt: local.expiresAt,
                    isFill: fill != nil,
                    isBoundForShared: toShared && shared != nil
                )
            )
        }
        var outcome = CacheOutcome<Value>(key: key)
        var isKept = true
        var isBypassed = false
        // What became of a fill, for the tally; a rejection unless changed.
        var tallied = \CoherenceTally.fillsRejectedChanged
        let update = { () -> Void in
            // A fill from the shared level while this cache's own write of the key is queued or
            // under way read an older value than the local one: it is returned, not kept (its echo
            // check could not tell it from the value written).
            if !toShared, let shared, shared.hasOwnWriteUnderWay(of: key) {
                tallied = \.fillsRejectedOwnWrite
                return
            }
            outcome.stored = value
            tallied = \.fillsInstalled
            if let coherence, !coherence.isOpen {
                tallied = \.fillsBypassed
                isBypassed = true
                // Tracking is down: the local levels are bypassed, and forget the older value.
                if let disk { outcome.tell(disk.enqueueRemove(DiskKey(key), observer: origin)) }
                memory?.removeValue(forKey: key)
                if toShared, let shared {
                    shared.enqueue(
                        sharedWrite(of: cached, forKey: key, serialized: data, lease: lease),
                        forKey: key,
                        completion: whenShared
                    )
                }
                return
            }
            if let pending, let disk, fill != nil, let coherence, !coherence.isTracked {
                // Untracked, a fill stays in memory; the disk's older copy goes (see
                // `CoherenceGate.isTracked`).
                outcome.tell(disk.enqueueRemove(pending.key, observer: origin))
            } else if let pending, let disk {
                if let whenOnDisk {
                    outcome.tell(
                        disk.enqueueWrite(pending.key, value: pending.value, observer: origin, completion: whenOnDisk)
                    )
                } else {
                    outcome.tell(disk.enqueueWrite(pending.key, value: pending.value, observer: origin))
                }
            }
            (outcome.memoryEvictions, isKept) = insertIntoMemory(local, forKey: key, cost: data?.count)
            // Under the stripe too, so that two sets of one key reach the shared level in order.
            if toShared, let shared {
                shared.enqueue(
                    sharedWrite(of: cached, forKey: key, serialized: data, lease: lease),
                    forKey: key,
                    completion: whenShared
                )
            }
        }
        let sharedCountMoved = changeKey(key, ifUnchangedSince: fill, update)
        if fill != nil {
            stripes.tally.withLock { tally in
                tally[keyPath: tallied] += 1
                if sharedCountMoved, tallied == \.fillsInstalled { tally.fillsKeptDespiteSharedCount += 1 }
            }
        }
        // A save waits for the disk: with the local levels bypassed, there is nothing to wait for.
        if isBypassed { whenOnDisk?(.success(())) }
        if !isKept { logNotKept(key, cost: data?.count) }
        return outcome
    }

    /// A value that cannot be serialized cannot be measured against `maxRamCost`: it is not kept, and
    /// the older value of its key is removed (it must not be served in place of the newer one), from
    /// the shared level too when the value was bound for it (`fromShared`).
    private func didFailToSerialize(
        key: String,
        ifUnchangedSince fill: KeyStripes.FillToken?,
        error: any Error,
        origin: (any DiskStoreObserver)?,
        fromShared: Bool
    ) -> CacheOutcome<Value> {
        let failure = CacheError.serializationFailed(key: key, underlying: error)
        HoardLogger.log(.warning, failure.message + " The value is not cached.")
        var outcome = CacheOutcome<Value>(key: key)
        outcome.storeFailure = failure
        changeKey(key, ifUnchangedSince: fill) {
            // The container hears of the shared removal as pending with the disk's (see
            // `DiskStore.noteSharedChangePending(of:)`).
            if fromShared, shared != nil { disk?.noteSharedChangePending(of: key) }
            if let disk { outcome.tell(disk.enqueueRemove(DiskKey(key), observer: origin)) }
            memory?.removeValue(forKey: key)
            if fromShared { shared?.enqueue(.remove, forKey: key) }
        }
        return outcome
    }

    /// Runs a change to `key` under its stripe; with `fill`, only if the key is unchanged since.
    ///
    /// - Returns: Whether a key sharing its finer count changed since `fill` (for the tally).
    @discardableResult
    private func changeKey(_ key: String, ifUnchangedSince fill: KeyStripes.FillToken?, _ body: () -> Void) -> Bool {
        guard let fill else {
            stripes.change(key.hashValue, body)
            return false
        }
        return stripes.ifUnchanged(since: fill) { body() }.sharedCountMoved
    }

    /// Removes the value for a key from both levels: memory at once, the file in the background.
    func removeValue(forKey key: String, origin: (any DiskStoreObserver)?) -> CacheOutcome<Value> {
        var outcome = CacheOutcome<Value>(key: key)
        outcome.isRemoval = true
        let diskKey = disk.map { _ in DiskKey(key) }
        stripes.change(key.hashValue) {
            // Other processes on the container hear of the removal with a mark that the shared
            // level's removal is still on its way: until it is made, a read of theirs finds the
            // value removed there, which must not fill the container (see
            // `DiskStore.noteSharedChangePending(of:)`).
            if shared != nil { disk?.noteSharedChangePending(of: key) }
            if let diskKey, let disk { outcome.tell(disk.enqueueRemove(diskKey, observer: origin)) }
            memory?.removeValue(forKey: key)
            shared?.enqueue(.remove, forKey: key)
        }
        return outcome
    }

    /// Empties memory.
    func clearMemory() {
        memory?.removeAll()
    }

    /// Empties disk, pending writes included.
    ///
    /// - Complexity: O(n) file removals.
    func clearDisk() {
        disk?.removeAll()
    }

    /// Empties the shared level of this cache's keys, in the background, after the writes queued
    /// so far are dropped; writes made later wait for it.
    func clearShared() {
        shared?.clear()
    }

    /// Begins a clear of every level (see `KeyStripes.beginClear()`): counted as a change of every
    /// key before anything is removed, and no fill is stored until ``endClear()``, so that none can
    /// write back, on a level already cleared, a value the clear removes.
    func beginClear() {
        stripes.beginClear()
    }

    /// Ends a clear begun with ``beginClear()``: drops from memory what reads copied back into it
    /// during the clear, and counts another change of every key.
    func endClear() {
        stripes.endClear { memory?.removeAll() }
    }

    /// Empties memory: another cache on the container, or another process, cleared it.
    ///
    /// Counted as a change of every key, with a memory level or without: a fetch or a shared read
    /// sent before the clear must not store what it returns (on disk, for a cache without memory).
    func forgetAll() {
        stripes.changeAll { memory?.removeAll() }
    }

    /// Drops `key` from memory: another cache on the container changed it.
    ///
    /// Counted as a change of the key, with a memory level or without: a fetch or a shared read
    /// sent before the change must not store what it returns over it.
    func forget(_ key: String) {
        stripes.change(key.hashValue) { _ = memory?.removeValue(forKey: key) }
    }

    /// Removes every value from memory, as evictions for `reason`.
    func evictAllFromMemory(_ reason: EvictionReason) -> [Eviction] {
        guard let memory else { return [] }
        let removed = stripes.changeAll { memory.removeAll { _, _ in true } }
        return removed.map { ($0.key, $0.value.value, reason) }
    }

    /// Removes every expired value from both levels.
    ///
    /// - Returns: The memory evictions and the disk keys removed.
    /// - Complexity: O(n), plus one file removal per expired entry.
    func removeExpired() -> (memory: [Eviction], disk: [String]) {
        let now = now
        let fromMemory =
            memory?.removeAll { _, cached in cached.expiresAt.isExpired(at: now) }
            .map { ($0.key, $0.value.value, EvictionReason.expired) } ?? []
        return (fromMemory, disk?.removeExpired(now: now) ?? [])
    }
}
