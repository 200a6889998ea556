import Foundation

extension Cache {
    /// Stores a value in memory now and on disk in the background, with the builder's default expiry.
    ///
    /// The value is readable as soon as this returns. Sets of one key land on disk in order; the last
    /// one wins. A value the serializer cannot encode stays in memory only (unless `maxRamCost` is
    /// set, which needs its size): the failure is logged and reported to
    /// ``CacheDelegate/cache(_:didFailToStoreValueForKey:error:)``.
    ///
    /// - Complexity: O(1), plus hashing the key when the disk level is on, plus serializing the value
    ///   when `maxRamCost` is set.
    @inlinable
    public func set(_ value: Value, forKey key: String) {
        set(value, forKey: key, expiry: engine.defaultExpiry)
    }

    /// Stores a value that expires as `expiry` says, in memory now and on disk in the background.
    ///
    /// ```swift
    /// feed.set(home, forKey: "home", expiry: .seconds(30))
    /// ```
    /// The expiry date is computed now, from the builder's clock, and stored with the entry on both
    /// levels, so it survives a restart. Otherwise the same as ``set(_:forKey:)``.
    ///
    /// - Complexity: O(1), plus hashing the key when the disk level is on, plus serializing the value
    ///   when `maxRamCost` is set.
    @inlinable
    public func set(_ value: Value, forKey key: String, expiry: CacheExpiry) {
        let cached = CachedValue(value, expiresAt: expiry.expiry(storedAt: engine.clock()))
        if engine.disk == nil, engine.ramCost == nil, engine.shared == nil, engine.memory != nil {
            // Memory only: specialised in the caller's module, like a hit, and hashing the key once.
            // Optional chaining, not `if let`: binding would retain the store on every set, and two
            // threads would fight over its reference count.
            let hash = key.hashValue
            let (evicted, isObserved) =
                engine.stripes.change(hash) { engine.memory?.observedSet(cached, forKey: key, hash: hash) }
                ?? (nil, false)
            // A fetch sent before this set must not answer the reads that begin after it (once memory
            // evicts the value, nothing else holds it).
            retireReads(of: key)
            if isObserved { reporter.didSet(value, forKey: key) }
            // Counted in the store; returned only when a delegate or a subscriber must hear of it.
            if let evicted {
                reporter.didEvictFromMemory((evicted.key, evicted.value.value, .capacity), isCounted: true, from: self)
            }
            return
        }
        store(cached, forKey: key)
    }

    /// Stores a value in both levels and reports what that did.
    @usableFromInline
    func store(_ cached: CachedValue<Value>, forKey key: String) {
        reporter.deliver(engine.store(cached, forKey: key, ifUnchangedSince: nil, origin: self), from: self)
        retireReads(of: key)
    }

    /// Removes the value for a key from both levels.
    ///
    /// Memory forgets it at once and reads miss at once; the file is removed in the background.
    public func removeValue(forKey key: String) {
        reporter.deliver(engine.removeValue(forKey: key, origin: self), from: self)
        retireReads(of: key)
    }

    /// Removes every value from both levels, and from the shared level (in the background); the
    /// delegate hears both clear callbacks first.
    ///
    /// Other caches on the container forget their values too. A fetch or a shared-level read that
    /// answers while the clear is under way, in this cache or in those, returns its value to its
    /// callers but keeps it on no level. A set made while the clear is under way reaches the shared
    /// level after its clear (a local level may lack it, and read it back from there).
    /// - Complexity: O(n) file removals; waits for a disk write in progress.
    public func removeAll() {
        // Before anything is removed, here and in the other caches on the container, counted as a
        // change of every key, and no fill is kept until the end: a fetch or a shared read that
        // answers during the clear could otherwise write what it returns on a level already
        // cleared, where it would outlive the clear.
        // A cache opened on the container before the end joins the clear (see `DiskStore.addObserver`).
        let (clear, peers) = disk?.beginClear(by: self) ?? (0, [])
        engine.beginClear()
        for peer in peers { peer.diskStoreWillClear() }
        // The shared level's clear is queued first: a set made during the clear then reaches the
        // shared level after it, wherever it falls between the local clears, and is found there
        // even when a local clear removed it (queued last, it would leave a set made after the disk
        // clear on disk alone, and lose it for the other instances). A read begun from here on
        // waits for it (see `SharedLevel.waitForOwnChanges(of:)`).
        engine.clearShared()
        retireReads(of: nil)
        ClearTestHooks.installed.run(.clearedShared, for: self)
        clearMemory()
        // Journaled with the disk's clear: until the shared level's clear is made, other processes
        // on the container must not fill what they read there.
        if engine.shared != nil { disk?.noteSharedChangePending(of: nil) }
        clearDisk()
        ClearTestHooks.installed.run(.clearedDisk, for: self)
        // A read made between the two clears may have copied a disk value back into memory.
        engine.endClear()
        for peer in disk?.endClear(clear) ?? [] { peer.diskStoreDidEndClear() }
    }

    /// Removes every value from memory; the delegate hears ``CacheDelegate/cacheWillClearMemory(_:)`` first.
    public func clearMemory() {
        guard memory != nil else { return }
        reporter.willClear(.memory, from: self)
        engine.clearMemory()
        reporter.didClear(.memory)
    }

    /// Removes every entry from disk, including writes not landed yet; the delegate hears
    /// ``CacheDelegate/cacheWillClearDisk(_:)`` first.
    ///
    /// - Complexity: O(n) file removals; waits for a disk write in progress.
    public func clearDisk() {
        guard disk != nil else { return }
        reporter.willClear(.disk, from: self)
        engine.clearDisk()
        reporter.didClear(.disk)
    }

    /// Removes every expired value from both levels: the sweep that complements removal on access.
    ///
    /// Each removal is an eviction with reason ``EvictionReason/expired``: counted in ``statistics``,
    /// told to the delegate and the event stream. Expired values are otherwise removed when a read
    /// meets them (unless stale values are served on fetch failure, which keeps them until this
    /// sweep), so call it from time to time (at launch, when the app goes to the background, from a
    /// timer) to reclaim the space of values nobody reads. Disk writes that have not landed yet are
    /// left for a later sweep.
    ///
    /// - Complexity: O(n) in the number of entries (expiry dates are kept in the disk index, so no
    ///   file is read), plus one file removal per expired entry; waits for a disk write in progress.
    public func removeExpired() {
        let (fromMemory, fromDisk) = engine.removeExpired()
        var outcome = CacheOutcome<Value>(key: "")
        outcome.memoryEvictions = fromMemory
        outcome.diskEvictions = fromDisk.map { ($0, .expired) }
        reporter.deliver(outcome, from: self)
    }
}
