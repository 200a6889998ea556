import Foundation

/// What a ``Cache`` tells the world: its delegate, its event stream, its statistics and the other
/// caches on its container.
///
/// The reporter owns the event hub, the weak delegate, every counter (but the two the memory store
/// keeps under its shard locks, where they cost one add: hits, and the evictions of the memory-only
/// set) and the one "is anyone listening" state, which it alone pushes into the memory store. It is
/// the only place that delivers a ``CacheOutcome``, and it is only ever called with no lock held, so
/// a delegate or a subscriber may call anything on the cache.
@usableFromInline
struct CacheReporter<Value: Sendable>: Sendable {
    @usableFromInline typealias Eviction = CacheOutcome<Value>.Eviction

    /// The counters, the delegate and who listens, under one lock.
    @usableFromInline
    struct State: Sendable {
        /// Every count of ``CacheStatistics`` but memory hits and the memory-only set's evictions
        /// (counted by the memory store) and the disk level's sizes (read from the store).
        @usableFromInline var statistics = CacheStatistics()
        /// Evictions by reason, indexed by `EvictionReason.index`.
        var evictionsByReason = [Int](repeating: 0, count: EvictionReason.allCases.count)
        weak var delegate: (any CacheDelegate<Value>)?
        /// The delegate held strongly when the cache owns it: a forwarder to a main-actor delegate.
        var retainedDelegate: (any CacheDelegate<Value>)?
        /// Whether ``Cache/events`` has a subscriber: the hub's count, as of its last change.
        @usableFromInline var isObserved = false

        /// Counts `times` evictions for `reason` from memory or disk.
        mutating func countEvictions(_ reason: EvictionReason, fromMemory: Bool, times: Int = 1) {
            evictionsByReason[reason.index] += times
            if fromMemory { statistics.memoryEvictions += times } else { statistics.diskEvictions += times }
        }
    }

    let hub: EventHub<CacheEvent<Value>>
    @usableFromInline let state: Locked<State>
    /// The shared level's failed reads and failed writes, each logged as an outage's start, a count
    /// now and then, and its end (apart: reads that work must not end an outage of writes).
    let sharedReadFailures = RepeatedFailureLog("The shared level's reads")
    let sharedWriteFailures = RepeatedFailureLog("The shared level's writes")
    /// The memory store, told who listens and read for the counts it keeps.
    let memory: MemoryStore<String, CachedValue<Value>>?

    init(delegate: CacheBuilder<Value>.WeakDelegate, memory: MemoryStore<String, CachedValue<Value>>?) {
        var initial = State()
        initial.delegate = delegate.delegate
        initial.retainedDelegate = delegate.retained
        let state = Locked(initial)
        self.state = state
        self.memory = memory
        // `memory` is captured strongly on purpose: a weak reference would move the store's
        // reference count to a side table and slow every retain on the hit path (measured: a fifth
        // of a hit's time). There is no cycle: the store knows nothing of the hub.
        hub = EventHub { hub in
            Self.updateListening(state, memory) { $0.isObserved = hub.isObserved }
        }
        Self.updateListening(state, memory) { _ in }
    }

    /// Changes who listens, then pushes the result into the memory store, under the state lock so
    /// that two changes never push out of order.
    private static func updateListening(
        _ state: Locked<State>,
        _ memory: MemoryStore<String, CachedValue<Value>>?,
        _ change: (inout State) -> Void
    ) {
        state.withLock { state in
            change(&state)
            memory?.setObserved(state.isObserved)
            memory?.setReportsEvictions(state.isObserved || state.delegate != nil)
        }
    }

    /// The delegate; setting it tells the memory store whether each eviction must be reported.
    var delegate: (any CacheDelegate<Value>)? {
        get { state.withLock { $0.delegate } }
        nonmutating set { setDelegate(newValue, retained: false) }
    }

    /// Sets the delegate; with `retained`, also holds it strongly (a forwarder only the cache owns).
    func setDelegate(_ delegate: (any CacheDelegate<Value>)?, retained: Bool) {
        Self.updateListening(state, memory) {
            $0.delegate = delegate
            $0.retainedDelegate = retained ? delegate : nil
        }
    }

    // MARK: - The fast paths

    @usableFromInline
    func didHitMemory(_ key: String) {
        hub.emit(.hit(key: key, level: .memory))
    }

    @usableFromInline
    func didSet(_ value: Value, forKey key: String) {
        hub.emit(.set(key: key, value: value))
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

    /// Reports one memory eviction (not to the logger: a memory eviction is routine, and logging
    /// would cost a global lock on every set).
    ///
    /// - Parameters:
    ///   - eviction: What was evicted, and why.
    ///   - isCounted: Whether the memory store counted it already (see `MemoryStore.evictionCount`).
    ///   - cache: The cache, for the delegate.
    @usableFromInline
    func didEvictFromMemory(_ eviction: Eviction, isCounted: Bool, from cache: Cache<Value>) {
        let (delegate, isObserved) = state.withLock {
            $0.countEvictions(eviction.reason, fromMemory: true, times: isCounted ? 0 : 1)
            return ($0.delegate, $0.isObserved)
        }
        if isObserved { hub.emit(.evicted(key: eviction.key, level: .memory, reason: eviction.reason)) }
        guard let delegate else { return }
        LockOrder.assertNoneHeld("calling the delegate")
        EvictionCallback.$isRunning.withValue(true) {
            delegate.cache(cache, willEvictFromMemory: eviction.value, forKey: eviction.key)
        }
    }

    // MARK: - Outcomes

    /// Tells the counters, the event stream, the delegate and the other caches on the container what
    /// one call did.
    ///
    /// Call it with no lock held. The order is fixed: disk evictions, the set, memory evictions, the
    /// read's hit or miss, the removal; then the delegate hears of the evictions and of a store
    /// failure; the other caches hear last.
    ///
    /// An outcome that is only a read (a disk hit, a miss) is counted here, specialised for the
    /// cache's value type; anything more goes through ``deliverInFull(_:from:)``.
    @inlinable
    func deliver(_ outcome: CacheOutcome<Value>, from cache: Cache<Value>) {
        guard outcome.isOnlyARead else {
            deliverInFull(outcome, from: cache)
            return
        }
        guard let read = outcome.read else { return }
        LockOrder.assertNoneHeld("delivering what a call did")
        let isObserved = state.withLock { state in
            switch read {
            case .hit(let level) where level == .disk: state.statistics.diskHits += 1
            case .hit(let level) where level == .shared: state.statistics.sharedHits += 1
            case .miss: state.statistics.misses += 1
            case .hit: break
            }
            return state.isObserved
        }
        if isObserved { emitEvents(of: outcome) }
    }

    /// Sends the events of `outcome` to the subscribers.
    @usableFromInline
    func emitEvents(of outcome: CacheOutcome<Value>) {
        hub.emit(events(of: outcome))
    }

    /// ``deliver(_:from:)`` for an outcome that is more than a read.
    @usableFromInline
    func deliverInFull(_ outcome: CacheOutcome<Value>, from cache: Cache<Value>) {
        let (delegate, isObserved) = state.withLock { state in
            for eviction in outcome.diskEvictions { state.countEvictions(eviction.reason, fromMemory: false) }
            for eviction in outcome.memoryEvictions { state.countEvictions(eviction.reason, fromMemory: true) }
            switch outcome.read {
            case .hit(let level) where level == .disk: state.statistics.diskHits += 1
            case .hit(let level) where level == .shared: state.statistics.sharedHits += 1
            case .miss: state.statistics.misses += 1
            case .hit, nil: break
            }
            return (state.delegate, state.isObserved)
        }
        if isObserved { hub.emit(events(of: outcome)) }
        if let delegate {
            LockOrder.assertNoneHeld("calling the delegate")
            for eviction in outcome.diskEvictions { delegate.cache(cache, willEvictFromDiskForKey: eviction.key) }
            if !outcome.memoryEvictions.isEmpty {
                EvictionCallback.$isRunning.withValue(true) {
                    for eviction in outcome.memoryEvictions {
                        delegate.cache(cache, willEvictFromMemory: eviction.value, forKey: eviction.key)
                    }
                }
            }
            if let failure = outcome.storeFailure {
                delegate.cache(cache, didFailToStoreValueForKey: outcome.key, error: failure)
            }
        }
        tellPeers(outcome.peerNews)
    }

    /// The events an outcome makes, in the order ``deliver(_:from:)`` documents.
    private func events(of outcome: CacheOutcome<Value>) -> [CacheEvent<Value>] {
        var events: [CacheEvent<Value>] = []
        for eviction in outcome.diskEvictions {
            events.append(.evicted(key: eviction.key, level: .disk, reason: eviction.reason))
        }
        if let value = outcome.stored { events.append(.set(key: outcome.key, value: value)) }
        for eviction in outcome.memoryEvictions {
            events.append(.evicted(key: eviction.key, level: .memory, reason: eviction.reason))
        }
        switch outcome.read {
        case .hit(let level): events.append(.hit(key: outcome.key, level: level))
        case .miss: events.append(.miss(key: outcome.key))
        case nil: break
        }
        if outcome.isRemoval { events.append(.removed(key: outcome.key)) }
        return events
    }

    /// Tells the other caches on the container that keys changed, or that every key went.
    func tellPeers(_ news: PeerNews) {
        news.deliver()
    }

    /// Tells the delegate that a level is about to be emptied.
    func willClear(_ level: StorageLevel, from cache: Cache<Value>) {
        guard let delegate else { return }
        LockOrder.assertNoneHeld("calling the delegate")
        switch level.kind {
        case .memory: delegate.cacheWillClearMemory(cache)
        case .disk: delegate.cacheWillClearDisk(cache)
        case .shared: break
        }
    }

    // MARK: - The shared level

    /// Counts keys invalidated by the shared level, once they are dropped.
    func didInvalidate(_ count: Int) {
        state.withLock { $0.statistics.invalidations += count }
    }

    /// Counts a drop of every local copy for coherence.
    func didFlushForCoherence() {
        state.withLock { $0.statistics.coherenceFlushes += 1 }
    }

    /// Counts a read of the shared level that found nothing usable.
    func didMissShared(_ key: String) {
        let isObserved = state.withLock {
            $0.statistics.sharedMisses += 1
            return $0.isObserved
        }
        if isObserved { hub.emit(.sharedMiss(key: key)) }
    }

    /// Counts, logs and tells the event stream of a failed read or write of the shared level.
    func didFailOnShared(_ key: String, _ error: CacheError, isWrite: Bool) {
        let isObserved = state.withLock {
            $0.statistics.sharedErrors += 1
            return $0.isObserved
        }
        (isWrite ? sharedWriteFailures : sharedReadFailures).failed("for \"\(key.prefix(100))\": \(error.message)")
        if isObserved { hub.emit(.sharedFailure(key: key, error: error)) }
    }

    /// Tells the event stream that a level was emptied.
    func didClear(_ level: StorageLevel) {
        hub.emit(.cleared(level))
    }

    // MARK: - Fetching

    /// Counts one call to the fetcher.
    func didCallFetcher() {
        state.withLock { $0.statistics.fetches += 1 }
    }

    /// Counts a fetch that failed after every attempt.
    func didFailToFetch() {
        state.withLock { $0.statistics.fetchFailures += 1 }
    }

    /// Tells the event stream that a failed fetch served an expired value.
    func didServeStale(_ value: Value, forKey key: String, expiredAt: Date) {
        hub.emit(.servedStale(key: key, value: value, expiredAt: expiredAt))
    }

    // MARK: - Statistics

    /// The counters, with the memory store's and the disk level's figures.
    func statistics(diskCount: Int, diskBytes: Int) -> CacheStatistics {
        let (counted, byReason) = state.withLock { ($0.statistics, $0.evictionsByReason) }
        var statistics = counted
        for reason in EvictionReason.allCases where byReason[reason.index] > 0 {
            statistics.evictionsByReason[reason] = byReason[reason.index]
        }
        statistics.memoryHits = memory?.hitCount ?? 0
        // Capacity evictions made by the memory-only set are counted in the store, under its locks.
        let countedInMemory = memory?.evictionCount ?? 0
        statistics.memoryEvictions += countedInMemory
        if countedInMemory > 0 { statistics.evictionsByReason[.capacity, default: 0] += countedInMemory }
        statistics.diskCount = diskCount
        statistics.diskBytes = diskBytes
        return statistics
    }
}

/// Whether the current task is inside a memory-eviction callback.
@usableFromInline
enum EvictionCallback {
    /// Set by ``CacheReporter`` while a delegate hears of a memory eviction.
    ///
    /// A read made from that callback is not copied into memory: the copy would evict another entry,
    /// whose callback could read it back, and so on without end.
    @usableFromInline @TaskLocal static var isRunning = false
}
