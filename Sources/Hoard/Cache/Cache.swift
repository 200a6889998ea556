import Foundation

/// A thread-safe object cache with a memory level over a disk level, used like a dictionary.
///
/// Make one with ``CacheBuilder``:
/// ```swift
/// let users = try CacheBuilder<User>()
///     .containerName("users")
///     .fetcher { id in try await api.user(id: id) }
///     .build()
///
/// users["42"] = user                              // memory now, disk in the background
/// let cached = users["42"]                        // memory, else disk
/// let fresh = try await users.getOrFetch(forKey: "7")  // memory → disk → fetcher
/// await users.flush()                             // every earlier set is on disk
/// ```
///
/// A set updates memory and returns; the disk write runs on a background writer, and the value is
/// readable at once, even if memory evicts it before the write lands. A read that misses memory and
/// hits disk copies the value back into memory. Both count as accesses for eviction, in the level
/// that served them. Caches in one process opened on the same container share one disk store and
/// drop a key from their memory when another of them sets or removes it.
///
/// Every method is safe to call from any thread. The memory level's operations are O(1); a disk read
/// is one file read on the caller's thread.
public final class Cache<Value: Sendable>: Sendable {
    @usableFromInline let memory: MemoryStore<String, CachedValue<Value>>?
    @usableFromInline let disk: DiskStore?
    let serializer: any CacheSerializer<Value>
    let fetcher: (@Sendable (String) async throws -> Value)?
    let retryBackoff: RetryBackoff
    let flights = SharedFlights<String, Value>()
    @usableFromInline let stripes = KeyStripes()
    /// Where "now" comes from.
    @usableFromInline let clock: @Sendable () -> Date
    /// The expiry of values set without one.
    @usableFromInline let defaultExpiry: CacheExpiry
    /// Whether a failed fetch returns the expired value, which reads then keep instead of removing.
    let servesStaleOnFetchFailure: Bool
    /// The memory cost budget and the most one entry may cost, when `maxRamCost` is set.
    @usableFromInline let ramCost: (limit: Int, entryLimit: Int)?
    let hub: EventHub<CacheEvent<Value>>
    /// The counters and settings; one lock, so that reporting an eviction takes one.
    let state: Locked<State>
    #if DEBUG
    /// Where this cache reports its invariant violations when released, in tests.
    let registry = CacheRegistry.current
    #endif

    struct State {
        /// Every count of ``statistics`` but memory hits (counted by the memory store), evictions by
        /// reason (in `evictionsByReason`) and disk sizes.
        var statistics = CacheStatistics()
        var evictionsByReason = [Int](repeating: 0, count: EvictionReason.allCases.count)
        /// Memory reads that found an expired value: the memory store counted them as hits.
        var expiredMemoryReads = 0
        var maxRetryCount: Int
        weak var delegate: (any CacheDelegate<Value>)?
        /// Whether ``events`` has a subscriber, mirrored from the hub.
        var isObserved = false

        init(maxRetryCount: Int, delegate: (any CacheDelegate<Value>)?) {
            self.maxRetryCount = maxRetryCount
            self.delegate = delegate
        }

        /// Counts `times` evictions from one level; returns the delegate and whether events are
        /// observed.
        mutating func countEvictions(
            _ reason: EvictionReason,
            fromMemory: Bool,
            times: Int = 1
        ) -> (delegate: (any CacheDelegate<Value>)?, isObserved: Bool) {
            evictionsByReason[reason.index] += times
            if fromMemory { statistics.memoryEvictions += times } else { statistics.diskEvictions += times }
            return (delegate, isObserved)
        }
    }

    /// A value a level removed on its own, and why.
    @usableFromInline typealias Eviction = (key: String, value: Value, reason: EvictionReason)

    init(
        configuration: CacheBuilder<Value>,
        memory: MemoryStore<String, CachedValue<Value>>?,
        disk: DiskStore?
    ) {
        self.memory = memory
        self.disk = disk
        serializer = configuration.serializer
        fetcher = configuration.fetcher
        retryBackoff = configuration.retryBackoff
        clock = configuration.clock
        defaultExpiry = configuration.expiry
        servesStaleOnFetchFailure = configuration.servesStaleOnFetchFailure
        ramCost = configuration.maxRamCost.map { limit in
            (limit, Int((Double(limit) * configuration.maxRamEntryShare).rounded(.down)))
        }
        let state = Locked(
            State(maxRetryCount: configuration.maxRetryCount, delegate: configuration.delegateBox.delegate)
        )
        self.state = state
        // `memory` is captured strongly on purpose: a weak reference would move the store's
        // reference count to a side table and slow every retain on the hit path (measured: a fifth
        // of a hit's time). There is no cycle: the store knows nothing of the hub.
        hub = EventHub { isObserved in
            memory?.setObserved(isObserved)
            let hasDelegate = state.withLock {
                $0.isObserved = isObserved
                return $0.delegate != nil
            }
            memory?.setReportsEvictions(isObserved || hasDelegate)
        }
        memory?.setReportsEvictions(configuration.delegateBox.delegate != nil)
        disk?.addObserver(self)
    }

    deinit {
        #if DEBUG
        registry?.record(invariantViolations())
        #endif
        disk?.removeObserver(self)
        hub.finish()
    }

    // MARK: - Settings

    /// How many times a failed fetch is retried after the first attempt; negative values count as 0.
    public var maxRetryCount: Int {
        get { state.withLock { $0.maxRetryCount } }
        set { state.withLock { $0.maxRetryCount = max(0, newValue) } }
    }

    /// Told of evictions, clears and failures; held weakly.
    public var delegate: (any CacheDelegate<Value>)? {
        get { state.withLock { $0.delegate } }
        set {
            let isObserved = state.withLock {
                $0.delegate = newValue
                return $0.isObserved
            }
            memory?.setReportsEvictions(isObserved || newValue != nil)
        }
    }

    /// Now, in seconds since 1970, from the builder's clock.
    @usableFromInline
    var now: Double { clock().timeIntervalSince1970 }

    // MARK: - Dictionary-like access

    /// The live value for `key` from memory or disk; setting a value stores it with the default
    /// expiry, setting `nil` removes it.
    ///
    /// - Complexity: O(1) for a memory hit; one file read for a disk hit.
    @inlinable
    public subscript(key: String) -> Value? {
        get { value(forKey: key) }
        set {
            if let newValue {
                set(newValue, forKey: key)
            } else {
                removeValue(forKey: key)
            }
        }
    }

    /// Returns the live value stored for a key, reading the disk level on a memory miss.
    ///
    /// An expired value is never returned: it is a miss, and it is removed (an eviction with reason
    /// ``EvictionReason/expired``), unless the cache serves stale values on fetch failure, which keeps
    /// it for that. A disk hit is copied into memory and counts as an access in both levels. A damaged
    /// entry file is a miss (it is removed and logged). This never calls the fetcher: see
    /// ``getOrFetch(forKey:)-4zr8e``.
    ///
    /// - Parameter key: Any string, the empty string included.
    /// - Returns: The cached value, or `nil` when neither level holds a live one.
    /// - Complexity: O(1) for a memory hit; one file read for a disk hit.
    @inlinable
    public func value(forKey key: String) -> Value? {
        if let (cached, isObserved) = memory?.observedValue(forKey: key) {
            if let cached {
                if !cached.isExpired(at: { now }) {
                    if isObserved { didHitMemory(key) }
                    return cached.value
                }
                didReadExpiredValueInMemory(cached, forKey: key)
            }
        }
        if disk == nil {
            // Memory only: no trip through the disk path, which is not specialised for `Value`.
            didMiss(key)
            return nil
        }
        return valueFromDisk(forKey: key)
    }

    /// Counts a read that found no live value in either level.
    @usableFromInline
    func didMiss(_ key: String) {
        let isObserved = state.withLock {
            $0.statistics.misses += 1
            return $0.isObserved
        }
        if isObserved { hub.emit(.miss(key: key)) }
    }

    @usableFromInline
    func didHitMemory(_ key: String) {
        hub.emit(.hit(key: key, level: .memory))
    }

    /// Counts a memory read that found an expired value, and removes it unless stale values are kept.
    @usableFromInline
    func didReadExpiredValueInMemory(_ cached: CachedValue<Value>, forKey key: String) {
        state.withLock { $0.expiredMemoryReads += 1 }
        guard !servesStaleOnFetchFailure, let memory else { return }
        // Only if still expired: a set may have replaced it meanwhile.
        let now = now
        if let removed = memory.removeValue(forKey: key, if: { $0.expiresAt.isExpired(at: now) }) {
            reportMemoryEvictions([(key, removed.value, .expired)])
        }
    }

    /// The disk half of ``value(forKey:)``: pending writes, then the entry file.
    @usableFromInline
    func valueFromDisk(forKey key: String) -> Value? {
        guard let cached = readFromDisk(forKey: key, keepingExpired: servesStaleOnFetchFailure),
            !cached.isExpired(at: { now })
        else {
            didMiss(key)
            return nil
        }
        let isObserved = state.withLock {
            $0.statistics.diskHits += 1
            return $0.isObserved
        }
        if isObserved { hub.emit(.hit(key: key, level: .disk)) }
        return cached.value
    }

    /// Reads `key` from the disk level; copies a live value into memory.
    ///
    /// - Parameters:
    ///   - key: The key to read.
    ///   - keepingExpired: Whether an expired entry is decoded and returned (for stale values) rather
    ///     than removed.
    ///   - countsAccess: Whether the read is an access (copied into memory, counted for eviction).
    /// - Returns: The value, live or, with `keepingExpired`, expired.
    private func readFromDisk(
        forKey key: String,
        keepingExpired: Bool,
        countsAccess: Bool = true
    ) -> CachedValue<Value>? {
        guard let disk else { return nil }
        let diskKey = DiskKey(key)
        let hash = key.hashValue
        let changes = stripes.changes(hash)
        let cached: CachedValue<Value>
        var cost: Int?
        switch disk.lookup(diskKey, countsAccess: countsAccess) {
        case .miss:
            return nil
        case .pending(let pending):
            if !keepingExpired, pending.expiresAt.isExpired(at: now) {
                // Only if nothing changed the key since the lookup: the pending value is then this one.
                let removal = stripes.ifUnchanged(hash, since: changes) {
                    disk.enqueueRemove(diskKey, observer: self)
                }
                if let others = removal {
                    for other in others { other.diskStoreDidChange(key: key) }
                    diskStore(willEvictKey: key, reason: .expired)
                }
                return nil
            }
            if let same = pending.value as? Value {
                cached = CachedValue(same, expiresAt: pending.expiresAt)
                if ramCost != nil { cost = try? pending.serialize().count }
            } else {
                // Set by another cache on the container with another value type.
                guard let data = try? pending.serialize(), let decoded = try? serializer.deserialize(data) else {
                    return nil
                }
                cached = CachedValue(decoded, expiresAt: pending.expiresAt)
                cost = data.count
            }
        case .stored(let entry):
            let expiresAt = entry.expiresAt
            if !keepingExpired, expiresAt.isExpired(at: now) {
                if disk.removeIfUnchanged(diskKey, payload: entry.payload, expiresAt: entry.expiresAt) {
                    HoardLogger.log(.debug, "Removed the expired entry for \"\(key.prefix(100))\" from disk.")
                    diskStore(willEvictKey: key, reason: .expired)
                }
                return nil
            }
            do {
                cached = CachedValue(try serializer.deserialize(entry.payload), expiresAt: expiresAt)
                cost = entry.payload.count
            } catch {
                HoardLogger.log(
                    .warning,
                    CacheError.deserializationFailed(key: key, underlying: error).message + " Removing the entry."
                )
                disk.removeIfUnchanged(diskKey, payload: entry.payload)
                return nil
            }
        }
        // Copy into memory unless the key changed meanwhile (memory would keep a stale value) or this
        // read comes from an eviction callback.
        if countsAccess, memory != nil, !EvictionCallback.isRunning, !cached.isExpired(at: { now }),
            let evicted = stripes.ifUnchanged(
                hash,
                since: changes,
                { insertIntoMemory(cached, forKey: key, cost: cost) }
            )
        {
            reportMemoryEvictions(evicted)
        }
        return cached
    }

    /// Returns the entry for a key with its expiry date, expired or not; not an access.
    ///
    /// Unlike ``value(forKey:)``, this returns an expired value (with ``CacheEntry/isExpired`` set)
    /// and removes nothing, so that code can tell a stale value, such as one a failed fetch served with
    /// `serveStaleOnFetchFailure`, from a fresh one. It counts in neither the statistics nor the
    /// eviction order, and sends no event.
    ///
    /// - Parameter key: Any string.
    /// - Returns: The entry from memory, else from disk; `nil` when neither holds one.
    /// - Complexity: O(1) from memory; one file read from disk.
    public func entry(forKey key: String) -> CacheEntry<Value>? {
        if let cached = memory?.peek(key) { return entry(cached, level: .memory) }
        guard let cached = readFromDisk(forKey: key, keepingExpired: true, countsAccess: false) else { return nil }
        return entry(cached, level: .disk)
    }

    private func entry(_ cached: CachedValue<Value>, level: StorageLevel) -> CacheEntry<Value> {
        CacheEntry(
            value: cached.value,
            expiresAt: cached.expiresAt.date,
            isExpired: cached.isExpired(at: { now }),
            level: level
        )
    }

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
        set(value, forKey: key, expiry: defaultExpiry)
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
        let cached = CachedValue(value, expiresAt: expiry.expiry(storedAt: clock()))
        if disk == nil, ramCost == nil, memory != nil {
            // Memory only: specialised in the caller's module, like a hit, and hashing the key once.
            // Optional chaining, not `if let`: binding would retain the store on every set, and two
            // threads would fight over its reference count.
            let hash = key.hashValue
            let (evicted, isObserved) =
                stripes.change(hash) { memory?.observedSet(cached, forKey: key, hash: hash) } ?? (nil, false)
            if isObserved { didSet(value, forKey: key) }
            // Counted in the store; returned only when a delegate or a subscriber must hear of it.
            if let evicted { reportMemoryEviction((evicted.key, evicted.value.value, .capacity), isCounted: true) }
            return
        }
        reportMemoryEvictions(store(cached, forKey: key, ifUnchangedSince: nil))
    }

    @usableFromInline
    func didSet(_ value: Value, forKey key: String) {
        hub.emit(.set(key: key, value: value))
    }

    /// Queues the disk write and updates memory as one step under the key's stripe; tells the other
    /// caches on the container afterwards.
    ///
    /// - Parameters:
    ///   - cached: The value to store, with its expiry date.
    ///   - key: Its key.
    ///   - changes: When given, stores nothing if the key changed since that stripe count (a fetch
    ///     that started before a set or removal must not undo it).
    /// - Returns: The memory entries evicted to make room, for the caller to report.
    @usableFromInline
    func store(_ cached: CachedValue<Value>, forKey key: String, ifUnchangedSince changes: UInt64?) -> [Eviction] {
        let value = cached.value
        let serializer = serializer
        var data: Data?
        if ramCost != nil {
            // The memory cost is the serialized size: serialize now, and hand the bytes to the writer.
            do {
                data = try serializer.serialize(value)
            } catch {
                didFailToSerialize(key: key, ifUnchangedSince: changes, error: error)
                return []
            }
        }
        let pending = disk.map { _ in
            (
                key: DiskKey(key),
                value: PendingValue(
                    value: value,
                    serialize: { [data] in try data ?? serializer.serialize(value) },
                    expiresAt: cached.expiresAt
                )
            )
        }
        var evicted: [Eviction] = []
        var isStored = false
        let update = { () -> [any DiskStoreObserver] in
            isStored = true
            let others = pending.flatMap { self.disk?.enqueueWrite($0.key, value: $0.value, observer: self) } ?? []
            evicted = self.insertIntoMemory(cached, forKey: key, cost: data?.count)
            return others
        }
        let hash = key.hashValue
        let others =
            changes.map { stripes.ifUnchanged(hash, since: $0, update) ?? [] } ?? stripes.change(hash, update)
        for other in others { other.diskStoreDidChange(key: key) }
        if isStored { hub.emit(.set(key: key, value: value)) }
        return evicted
    }

    /// A value that cannot be serialized cannot be measured against `maxRamCost`: it is not kept, and
    /// the older value of its key is removed (it must not be served in place of the newer one).
    private func didFailToSerialize(key: String, ifUnchangedSince changes: UInt64?, error: any Error) {
        let failure = CacheError.serializationFailed(key: key, underlying: error)
        HoardLogger.log(.warning, failure.message + " The value is not cached.")
        let diskKey = disk.map { _ in DiskKey(key) }
        let remove = { () -> [any DiskStoreObserver] in
            let others = diskKey.flatMap { self.disk?.enqueueRemove($0, observer: self) } ?? []
            self.memory?.removeValue(forKey: key)
            return others
        }
        let hash = key.hashValue
        let others =
            changes.map { stripes.ifUnchanged(hash, since: $0, remove) ?? [] } ?? stripes.change(hash, remove)
        for other in others { other.diskStoreDidChange(key: key) }
        delegate?.cache(self, didFailToStoreValueForKey: key, error: failure)
    }

    /// Puts a value in memory, within the count limit and, with `maxRamCost`, the cost limits.
    ///
    /// Call it under the key's stripe. A value whose cost is above the per-entry limit is not kept
    /// (the older value of its key is dropped).
    /// - Returns: The entries evicted to make room.
    func insertIntoMemory(_ cached: CachedValue<Value>, forKey key: String, cost: Int?) -> [Eviction] {
        guard let memory else { return [] }
        guard let ramCost else {
            guard let evicted = memory.set(cached, forKey: key) else { return [] }
            return [(evicted.key, evicted.value.value, .capacity)]
        }
        let cost = cost ?? 0
        let outcome = memory.set(
            cached,
            forKey: key,
            cost: cost,
            costLimit: ramCost.limit,
            entryCostLimit: ramCost.entryLimit
        )
        if !outcome.isKept {
            HoardLogger.log(
                .debug,
                "Not keeping \"\(key.prefix(100))\" in memory: it costs \(cost) bytes, more than "
                    + "\(ramCost.entryLimit) (the share of maxRamCost one entry may take)."
            )
        }
        return outcome.evicted.map { ($0.key, $0.value.value, $0.reason) }
    }

    /// Counts one memory eviction and reports it to the delegate and the event stream (not to the
    /// logger: a memory eviction is routine, and logging would cost a global lock on every set).
    ///
    /// - Parameters:
    ///   - eviction: What was evicted, and why.
    ///   - isCounted: Whether the memory store counted it already (see `MemoryStore.evictionCount`).
    @usableFromInline
    func reportMemoryEviction(_ eviction: Eviction, isCounted: Bool = false) {
        let (delegate, isObserved) = state.withLock {
            $0.countEvictions(eviction.reason, fromMemory: true, times: isCounted ? 0 : 1)
        }
        if isObserved { hub.emit(.evicted(key: eviction.key, level: .memory, reason: eviction.reason)) }
        guard let delegate else { return }
        EvictionCallback.$isRunning.withValue(true) {
            delegate.cache(self, willEvictFromMemory: eviction.value, forKey: eviction.key)
        }
    }

    /// Counts memory evictions and reports them to the delegate and the event stream.
    @usableFromInline
    func reportMemoryEvictions(_ evictions: [Eviction]) {
        guard evictions.count > 1 else {
            if let eviction = evictions.first { reportMemoryEviction(eviction) }
            return
        }
        let (delegate, isObserved) = state.withLock { state in
            for eviction in evictions.dropFirst() { _ = state.countEvictions(eviction.reason, fromMemory: true) }
            return state.countEvictions(evictions[0].reason, fromMemory: true)
        }
        if isObserved { hub.emit(evictions.map { .evicted(key: $0.key, level: .memory, reason: $0.reason) }) }
        guard let delegate else { return }
        EvictionCallback.$isRunning.withValue(true) {
            for eviction in evictions {
                delegate.cache(self, willEvictFromMemory: eviction.value, forKey: eviction.key)
            }
        }
    }

    /// Removes the value for a key from both levels.
    ///
    /// Memory forgets it at once and reads miss at once; the file is removed in the background.
    public func removeValue(forKey key: String) {
        let diskKey = disk.map { _ in DiskKey(key) }
        let others = stripes.change(key.hashValue) {
            let others = diskKey.flatMap { disk?.enqueueRemove($0, observer: self) } ?? []
            memory?.removeValue(forKey: key)
            return others
        }
        for other in others { other.diskStoreDidChange(key: key) }
        hub.emit(.removed(key: key))
    }

    /// Removes every value from both levels; the delegate hears both clear callbacks first.
    ///
    /// Other caches on the same container forget their values too.
    /// - Complexity: O(n) file removals; waits for a disk write in progress.
    public func removeAll() {
        clearMemory()
        clearDisk()
        // A read made between the two clears may have copied a disk value back into memory.
        stripes.changeAll { memory?.removeAll() }
        for other in disk?.observers(except: self) ?? [] { other.diskStoreDidClear() }
    }

    /// Removes every value from memory; the delegate hears ``CacheDelegate/cacheWillClearMemory(_:)`` first.
    public func clearMemory() {
        guard let memory else { return }
        delegate?.cacheWillClearMemory(self)
        memory.removeAll()
        hub.emit(.cleared(.memory))
    }

    /// Removes every entry from disk, including writes not landed yet; the delegate hears
    /// ``CacheDelegate/cacheWillClearDisk(_:)`` first.
    ///
    /// - Complexity: O(n) file removals; waits for a disk write in progress.
    public func clearDisk() {
        guard let disk else { return }
        delegate?.cacheWillClearDisk(self)
        disk.removeAll()
        hub.emit(.cleared(.disk))
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
        let now = now
        if let memory {
            let removed = memory.removeAll { _, cached in cached.expiresAt.isExpired(at: now) }
            reportMemoryEvictions(removed.map { ($0.key, $0.value.value, .expired) })
        }
        for key in disk?.removeExpired(now: now) ?? [] {
            diskStore(willEvictKey: key, reason: .expired)
        }
    }

    /// Every event from now on: sets, hits, misses, evictions with their reasons, stale values
    /// served, removals and clears, for as long as the stream is iterated.
    ///
    /// ```swift
    /// for await event in feed.events {
    ///     if case .evicted(let key, _, .expired) = event { print("\(key) expired") }
    /// }
    /// ```
    /// Each access makes a new subscription, and every subscription receives every event. A slow
    /// subscriber never blocks the cache: each subscription buffers the newest 1 000 events
    /// (see ``events(bufferingNewest:)`` to choose) and drops the oldest unread ones beyond that.
    /// The stream ends when the cache is released; stop iterating (or cancel the task) to
    /// unsubscribe. With no subscriber, a memory hit pays one branch for events.
    public var events: AsyncStream<CacheEvent<Value>> { events(bufferingNewest: 1_000) }

    /// Every event from now on, buffering at most `limit` unread events (the newest).
    ///
    /// - Parameter limit: How many unread events the subscription keeps before dropping the oldest;
    ///   at least 1.
    /// - Returns: A new subscription; see ``events``.
    public func events(bufferingNewest limit: Int) -> AsyncStream<CacheEvent<Value>> {
        hub.subscribe(bufferingNewest: max(1, limit))
    }

    /// Whether either level holds a live value for a key; not an access, and no file is read.
    ///
    /// - Parameter key: Any string.
    /// - Returns: `true` when memory holds a live value for the key, or disk has a live entry or a
    ///   pending write for it.
    public func contains(_ key: String) -> Bool {
        let now = now
        if let cached = memory?.peek(key), !cached.expiresAt.isExpired(at: now) { return true }
        return disk?.contains(DiskKey(key)) { !$0.isExpired(at: now) } ?? false
    }

    /// Every key either level holds a live value for, each once, in no particular order.
    ///
    /// Disk keys are the keys stored in the entries (and pending writes), not file names, so they
    /// are listed as they were set.
    /// - Complexity: O(n) in the number of entries; no file is read.
    public var allKeys: [String] {
        let now = now
        var seen = Set<String>()
        var keys: [String] = []
        let inMemory = memory?.keys { !$0.expiresAt.isExpired(at: now) } ?? []
        for key in inMemory + (disk?.allKeys { !$0.isExpired(at: now) } ?? []) where seen.insert(key).inserted {
            keys.append(key)
        }
        return keys
    }

    /// The bytes the entry files on disk take together.
    ///
    /// After ``flush()`` returns, it never exceeds the builder's `maxDiskBytes`.
    public var diskBytes: Int { disk?.byteCount ?? 0 }

    /// The memory cost of the values in memory: the sum of their serialized sizes when
    /// `maxRamCost` is set, else 0.
    ///
    /// It never exceeds `maxRamCost`.
    public var memoryCost: Int { ramCost == nil ? 0 : memory?.totalCost ?? 0 }

    /// What the cache has done since it was built, and what its disk level holds now.
    public var statistics: CacheStatistics {
        let state = state.withLock { ($0.statistics, $0.evictionsByReason, $0.expiredMemoryReads) }
        var statistics = state.0
        for reason in EvictionReason.allCases where state.1[reason.index] > 0 {
            statistics.evictionsByReason[reason] = state.1[reason.index]
        }
        statistics.memoryHits = (memory?.hitCount ?? 0) - state.2
        // Capacity evictions made by the memory-only set are counted in the store, under its locks.
        let counted = memory?.evictionCount ?? 0
        statistics.memoryEvictions += counted
        if counted > 0 { statistics.evictionsByReason[.capacity, default: 0] += counted }
        statistics.diskCount = diskCount
        statistics.diskBytes = diskBytes
        return statistics
    }

    /// The number of values in memory, expired ones not yet removed included.
    public var memoryCount: Int { memory?.count ?? 0 }

    /// The number of entry files on disk, expired ones not yet removed included; writes that have
    /// not landed yet are not counted.
    ///
    /// After ``flush()`` returns, it never exceeds the disk count limit.
    public var diskCount: Int { disk?.count ?? 0 }

    /// Waits until every set and removal made before the call is on disk, and the eviction order is
    /// saved.
    ///
    /// Files are written without `fsync`: they survive the process being killed, and a power loss
    /// can lose the last writes but never tear one (a torn file fails its checksum and is a miss).
    public func flush() async {
        await disk?.flush()
    }
}

extension Cache {
    /// Checks every internal structure of the cache; traps with a description of the first problem.
    ///
    /// The memory level's shards (links, counts, each key in its shard), then the disk level against
    /// its folder (see `DiskStore.invariantViolations()`). Call it once the cache is quiet, after
    /// ``flush()``. A debugging aid for tests (`@testable import Hoard`): it costs O(n) and a listing
    /// of the container, and nothing in the library calls it.
    func validateInvariants() {
        let problems = invariantViolations()
        precondition(problems.isEmpty, "Cache invariants violated: " + problems.joined(separator: "; "))
    }

    /// What ``validateInvariants()`` checks, as a list of problems (traps on a broken memory level).
    func invariantViolations() -> [String] {
        memory?.checkInvariants()
        return disk?.invariantViolations() ?? []
    }
}

extension Cache: DiskStoreObserver {
    func diskStore(willEvictKey key: String, reason: EvictionReason) {
        let (delegate, isObserved) = state.withLock { $0.countEvictions(reason, fromMemory: false) }
        if isObserved { hub.emit(.evicted(key: key, level: .disk, reason: reason)) }
        delegate?.cache(self, willEvictFromDiskForKey: key)
    }

    func diskStore(didFailToStoreKey key: String, error: CacheError) {
        delegate?.cache(self, didFailToStoreValueForKey: key, error: error)
    }

    func diskStoreDidChange(key: String) {
        guard let memory else { return }
        stripes.change(key.hashValue) { _ = memory.removeValue(forKey: key) }
    }

    func diskStoreDidClear() {
        guard let memory else { return }
        stripes.changeAll { memory.removeAll() }
    }
}
