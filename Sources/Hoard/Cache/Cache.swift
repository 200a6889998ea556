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
    // Inside, a cache is an engine that changes the levels and returns what happened, and a
    // reporter that alone tells the delegate, the event stream, the counters and the other caches
    // on the container, after every lock is released. This class only connects the two.

    /// The levels, the key stripes, expiry and cost.
    @usableFromInline let engine: CacheEngine<Value>
    /// The delegate, the events, the counters.
    @usableFromInline let reporter: CacheReporter<Value>
    let fetcher: (@Sendable (String) async throws -> Value)?
    let retryBackoff: RetryBackoff
    let retryCount: Locked<Int>
    let flights = SharedFlights<String, Value>()
    /// The subscription to the shared level's invalidations, with ``CacheCoherence/invalidations``.
    let invalidations = Locked<(any InvalidationSubscription)?>(nil)
    /// The echo checks (see `checkEcho`) waiting for the next read-back, and how many are under way.
    let echoChecks = Locked(EchoChecks())
    /// Whether tracking was lost (or never confirmed yet) while the local copies kept serving
    /// (``CacheCoherence/Outage/serveLocalCopies``): they are dropped once it is back; and whether
    /// it was ever confirmed.
    let outage = Locked((dropsOnReturn: false, wasTracked: false))
    #if DEBUG
    /// Where this cache reports its invariant violations when released, in tests.
    let registry = CacheRegistry.current
    #endif

    init(
        configuration: CacheBuilder<Value>,
        memory: MemoryStore<String, CachedValue<Value>>?,
        disk: DiskStore?
    ) {
        let reporter = CacheReporter(delegate: configuration.delegateBox, memory: memory)
        self.reporter = reporter
        let shared = configuration.sharedLevel.map { level in
            SharedLevel(
                level,
                onFailure: { key, error in reporter.didFailOnShared(key, error, isWrite: true) },
                onSuccess: { reporter.sharedWriteFailures.succeeded() },
                leases: configuration.makeLeases(),
                clock: configuration.clock
            )
        }
        engine = CacheEngine(configuration: configuration, memory: memory, disk: disk, shared: shared)
        fetcher = configuration.fetcher
        retryBackoff = configuration.retryBackoff
        retryCount = Locked(configuration.maxRetryCount)
        // A clear of the container under way (by another cache) is this cache's too: a read it
        // makes before the clear ends must not keep what a level not cleared yet returns. No fill
        // can be made before the cache is returned; a clear that ends in between only ends sooner.
        for _ in 0..<(disk?.addObserver(self) ?? 0) { engine.beginClear() }
        shared?.setInvalidationHandler { [weak self] key in self?.invalidate(key) }
        shared?.setLandedHandler { [weak self] key in self?.retireReads(of: key) }
        shared?.setCompletionLock { [stripes = engine.stripes] key, body in stripes.change(key.hashValue, body) }
    }

    deinit {
        #if DEBUG
        registry?.record(invariantViolations())
        #endif
        invalidations.withLock { $0 }?.cancel()
        disk?.removeObserver(self)
        reporter.hub.finish()
    }

    /// The memory level, if it is on.
    @inlinable
    var memory: MemoryStore<String, CachedValue<Value>>? { engine.memory }

    /// The disk level, if it is on.
    @inlinable
    var disk: DiskStore? { engine.disk }

    // MARK: - Settings

    /// How many times a failed fetch is retried after the first attempt.
    ///
    /// - Precondition: The new value is 0 or more; setting a negative one stops the program with a
    ///   message naming it (see "Bad arguments" in the README). The builder's ``CacheBuilder/maxRetryCount(_:)``
    ///   makes ``CacheBuilder/build()`` throw instead.
    public var maxRetryCount: Int {
        get { retryCount.withLock { $0 } }
        set {
            precondition(newValue >= 0, "Cache.maxRetryCount must be 0 or more, not \(newValue).")
            retryCount.withLock { $0 = newValue }
        }
    }

    /// Told of evictions, clears and failures; held weakly.
    ///
    /// After ``setMainActorDelegate(_:)``, this is the cache's own forwarder to that delegate.
    public var delegate: (any CacheDelegate<Value>)? {
        get { reporter.delegate }
        set { reporter.delegate = newValue }
    }

    /// Sets a delegate told on the main actor, held weakly, in place of ``delegate``; `nil` removes it.
    ///
    /// See ``MainActorCacheDelegate``.
    public func setMainActorDelegate(_ delegate: (any MainActorCacheDelegate<Value>)?) {
        reporter.setDelegate(delegate.map { MainActorDelegateForwarder($0) }, retained: true)
    }

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
    /// ``getOrFetch(forKey:)``.
    ///
    /// - Parameter key: Any string, the empty string included.
    /// - Returns: The cached value, or `nil` when neither level holds a live one.
    /// - Complexity: O(1) for a memory hit; one file read for a disk hit.
    @inlinable
    public func value(forKey key: String) -> Value? {
        if let value = valueFromMemory(forKey: key) { return value }
        return valueAfterMemoryMiss(forKey: key)
    }

    /// The memory half of ``value(forKey:)``: a live value counts as a hit; a miss is not counted
    /// yet (``valueAfterMemoryMiss(forKey:)`` counts the read once it knows what disk holds).
    @inlinable
    func valueFromMemory(forKey key: String) -> Value? {
        guard let (cached, isObserved) = engine.memory?.valueAndObservation(forKey: key), let cached else { return nil }
        if !cached.isExpired(at: { engine.now }) {
            if isObserved { reporter.didHitMemory(key) }
            return cached.value
        }
        reporter.deliver(engine.expiredInMemory(cached, forKey: key), from: self)
        return nil
    }

    /// The rest of ``value(forKey:)`` once memory missed: disk, counting the read as a hit or a miss.
    @inlinable
    func valueAfterMemoryMiss(forKey key: String) -> Value? {
        if engine.disk == nil {
            // Memory only: no trip through the disk path.
            reporter.didMiss(key)
            return nil
        }
        return valueFromDisk(forKey: key)
    }

    /// The disk half of ``value(forKey:)``: pending writes, then the entry file.
    @inlinable
    func valueFromDisk(forKey key: String) -> Value? {
        // Without a memory level nothing is copied: the task-local is not read.
        let (value, outcome) = engine.valueFromDisk(
            forKey: key,
            copiesIntoMemory: engine.memory != nil && !EvictionCallback.isRunning,
            origin: self
        )
        reporter.deliver(outcome, from: self)
        return value
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
        engine.entry(forKey: key)
    }

    /// Whether either level holds a live value for a key; not an access, and no file is read.
    ///
    /// With ``CacheBuilder/coherence(_:)``, the disk level counts only while it serves reads: not
    /// until tracking is first confirmed (when the local copies are bypassed meanwhile), not from a
    /// loss of tracking to its return with ``CacheCoherence/Outage/bypassLocalCopies``, and not while
    /// the disk clear that such a loss (or `build()`) begins is under way. What ``value(forKey:)``
    /// would not return is not contained.
    ///
    /// - Parameter key: Any string.
    /// - Returns: `true` when memory holds a live value for the key, or disk has a live entry or a
    ///   pending write for it that a read would return.
    public func contains(_ key: String) -> Bool {
        engine.contains(key)
    }

    /// Every key either level holds a live value for, each once, in no particular order.
    ///
    /// Disk keys are the keys stored in the entries (and pending writes), not file names, so they
    /// are listed as they were set. With ``CacheBuilder/coherence(_:)``, the disk's keys are listed
    /// only while it serves reads, as for ``contains(_:)``.
    /// - Complexity: O(n) in the number of entries; no file is read.
    public var allKeys: [String] { engine.allKeys }
}
