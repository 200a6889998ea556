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
    @usableFromInline let memory: MemoryStore<String, Value>?
    @usableFromInline let disk: DiskStore?
    let serializer: any CacheSerializer<Value>
    let fetcher: (@Sendable (String) async throws -> Value)?
    let retryBackoff: RetryBackoff
    let flights = SharedFlights<String, Value>()
    @usableFromInline let stripes = KeyStripes()
    /// Every count of ``statistics`` but memory hits (counted by the memory store) and disk sizes.
    let counters = Locked(CacheStatistics())
    private let settings: Locked<Settings>

    struct Settings {
        var maxRetryCount: Int
        weak var delegate: (any CacheDelegate<Value>)?
    }

    init(configuration: CacheBuilder<Value>, memory: MemoryStore<String, Value>?, disk: DiskStore?) {
        self.memory = memory
        self.disk = disk
        serializer = configuration.serializer
        fetcher = configuration.fetcher
        retryBackoff = configuration.retryBackoff
        settings = Locked(
            Settings(maxRetryCount: configuration.maxRetryCount, delegate: configuration.delegateBox.delegate)
        )
        disk?.addObserver(self)
    }

    deinit {
        disk?.removeObserver(self)
    }

    // MARK: - Settings

    /// How many times a failed fetch is retried after the first attempt; negative values count as 0.
    public var maxRetryCount: Int {
        get { settings.withLock { $0.maxRetryCount } }
        set { settings.withLock { $0.maxRetryCount = max(0, newValue) } }
    }

    /// Told of evictions, clears and failures; held weakly.
    public var delegate: (any CacheDelegate<Value>)? {
        get { settings.withLock { $0.delegate } }
        set { settings.withLock { $0.delegate = newValue } }
    }

    // MARK: - Dictionary-like access

    /// The value for `key` from memory or disk; setting a value stores it, setting `nil` removes it.
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

    /// Returns the value stored for a key, reading the disk level on a memory miss.
    ///
    /// A disk hit is copied into memory and counts as an access in both levels. A damaged entry file
    /// is a miss (it is removed and logged). This never calls the fetcher: see
    /// ``getOrFetch(forKey:)-4zr8e``.
    ///
    /// - Parameter key: Any string, the empty string included.
    /// - Returns: The cached value, or `nil` when neither level holds it.
    /// - Complexity: O(1) for a memory hit; one file read for a disk hit.
    @inlinable
    public func value(forKey key: String) -> Value? {
        if let memory, let value = memory.value(forKey: key) { return value }
        return valueFromDisk(forKey: key)
    }

    /// The disk half of ``value(forKey:)``: pending writes, then the entry file.
    @usableFromInline
    func valueFromDisk(forKey key: String) -> Value? {
        guard let value = readFromDisk(forKey: key) else {
            counters.withLock { $0.misses += 1 }
            return nil
        }
        counters.withLock { $0.diskHits += 1 }
        return value
    }

    private func readFromDisk(forKey key: String) -> Value? {
        guard let disk else { return nil }
        let diskKey = DiskKey(key)
        let changes = stripes.changes(key)
        let value: Value
        switch disk.lookup(diskKey) {
        case .miss:
            return nil
        case .pending(let pending):
            if let same = pending.value as? Value {
                value = same
            } else {
                // Set by another cache on the container with another value type.
                guard let decoded = try? serializer.deserialize(pending.serialize()) else { return nil }
                value = decoded
            }
        case .stored(let entry):
            do {
                value = try serializer.deserialize(entry.payload)
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
        if let memory, !EvictionCallback.isRunning,
            let evicted = stripes.ifUnchanged(key, since: changes, { memory.set(value, forKey: key) })
        {
            reportMemoryEviction(evicted)
        }
        return value
    }

    /// Stores a value in memory now and on disk in the background.
    ///
    /// The value is readable as soon as this returns. Sets of one key land on disk in order; the last
    /// one wins. A value the serializer cannot encode stays in memory only: the failure is logged and
    /// reported to ``CacheDelegate/cache(_:didFailToStoreValueForKey:error:)``.
    ///
    /// - Complexity: O(1), plus hashing the key when the disk level is on.
    @inlinable
    public func set(_ value: Value, forKey key: String) {
        if disk == nil, let memory {
            // Memory only: specialised in the caller's module, like a hit.
            if let evicted = stripes.change(key, { memory.set(value, forKey: key) }) { reportMemoryEviction(evicted) }
            return
        }
        if let evicted = store(value, forKey: key, ifUnchangedSince: nil) { reportMemoryEviction(evicted) }
    }

    /// Queues the disk write and updates memory as one step under the key's stripe; tells the other
    /// caches on the container afterwards.
    ///
    /// - Parameters:
    ///   - value: The value to store.
    ///   - key: Its key.
    ///   - changes: When given, stores nothing if the key changed since that stripe count (a fetch
    ///     that started before a set or removal must not undo it).
    /// - Returns: The memory entry evicted to make room, for the caller to report.
    @usableFromInline
    func store(_ value: Value, forKey key: String, ifUnchangedSince changes: UInt64?) -> (key: String, value: Value)? {
        var pending: (key: DiskKey, value: PendingValue)?
        if disk != nil {
            let serializer = serializer
            pending = (
                DiskKey(key),
                PendingValue(value: value, serialize: { try serializer.serialize(value) }, expiresAt: nil)
            )
        }
        var evicted: (key: String, value: Value)?
        let update = { () -> [any DiskStoreObserver] in
            let others = pending.flatMap { self.disk?.enqueueWrite($0.key, value: $0.value, observer: self) } ?? []
            evicted = self.memory?.set(value, forKey: key)
            return others
        }
        let others = changes.map { stripes.ifUnchanged(key, since: $0, update) ?? [] } ?? stripes.change(key, update)
        for other in others { other.diskStoreDidChange(key: key) }
        return evicted
    }

    @usableFromInline
    func reportMemoryEviction(_ evicted: (key: String, value: Value)) {
        counters.withLock { $0.memoryEvictions += 1 }
        HoardLogger.log(.debug, "Evicted \"\(evicted.key.prefix(100))\" from memory.")
        guard let delegate else { return }
        EvictionCallback.$isRunning.withValue(true) {
            delegate.cache(self, willEvictFromMemory: evicted.value, forKey: evicted.key)
        }
    }

    /// Removes the value for a key from both levels.
    ///
    /// Memory forgets it at once and reads miss at once; the file is removed in the background.
    public func removeValue(forKey key: String) {
        let diskKey = disk.map { _ in DiskKey(key) }
        let others = stripes.change(key) {
            let others = diskKey.flatMap { disk?.enqueueRemove($0, observer: self) } ?? []
            memory?.removeValue(forKey: key)
            return others
        }
        for other in others { other.diskStoreDidChange(key: key) }
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
    }

    /// Removes every entry from disk, including writes not landed yet; the delegate hears
    /// ``CacheDelegate/cacheWillClearDisk(_:)`` first.
    ///
    /// - Complexity: O(n) file removals; waits for a disk write in progress.
    public func clearDisk() {
        guard let disk else { return }
        delegate?.cacheWillClearDisk(self)
        disk.removeAll()
    }

    /// Whether either level holds a value for a key; not an access, and no file is read.
    ///
    /// - Parameter key: Any string.
    /// - Returns: `true` when memory holds the key, or disk has an entry or a pending write for it.
    public func contains(_ key: String) -> Bool {
        if memory?.contains(key) == true { return true }
        return disk?.contains(DiskKey(key)) ?? false
    }

    /// Every key either level holds, each once, in no particular order.
    ///
    /// Disk keys are the keys stored in the entries (and pending writes), not file names, so they
    /// are listed as they were set.
    /// - Complexity: O(n) in the number of entries.
    public var allKeys: [String] {
        var seen = Set<String>()
        var keys: [String] = []
        for key in (memory?.keysInEvictionOrder ?? []) + (disk?.allKeys ?? []) where seen.insert(key).inserted {
            keys.append(key)
        }
        return keys
    }

    /// The bytes the entry files on disk take together.
    ///
    /// After ``flush()`` returns, it never exceeds the builder's `maxDiskBytes`.
    public var diskBytes: Int { disk?.byteCount ?? 0 }

    /// What the cache has done since it was built, and what its disk level holds now.
    public var statistics: CacheStatistics {
        var statistics = counters.withLock { $0 }
        statistics.memoryHits = memory?.hitCount ?? 0
        statistics.diskCount = diskCount
        statistics.diskBytes = diskBytes
        return statistics
    }

    /// The number of values in memory.
    public var memoryCount: Int { memory?.count ?? 0 }

    /// The number of entry files on disk; writes that have not landed yet are not counted.
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

extension Cache: DiskStoreObserver {
    func diskStore(willEvictKey key: String) {
        counters.withLock { $0.diskEvictions += 1 }
        delegate?.cache(self, willEvictFromDiskForKey: key)
    }

    func diskStore(didFailToStoreKey key: String, error: CacheError) {
        delegate?.cache(self, didFailToStoreValueForKey: key, error: error)
    }

    func diskStoreDidChange(key: String) {
        guard let memory else { return }
        stripes.change(key) { _ = memory.removeValue(forKey: key) }
    }

    func diskStoreDidClear() {
        guard let memory else { return }
        stripes.changeAll { memory.removeAll() }
    }
}
