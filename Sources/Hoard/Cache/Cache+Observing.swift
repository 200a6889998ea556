import Foundation

extension Cache {
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
    /// - Parameter limit: How many unread events the subscription keeps before dropping the oldest.
    /// - Returns: A new subscription; see ``events``.
    /// - Precondition: `limit` is 1 or more; otherwise the program stops with a message naming it
    ///   (see "Bad arguments" in the README).
    public func events(bufferingNewest limit: Int) -> AsyncStream<CacheEvent<Value>> {
        precondition(limit >= 1, "events(bufferingNewest:) needs a limit of 1 or more, not \(limit).")
        return reporter.hub.subscribe(bufferingNewest: limit)
    }

    /// The bytes the entry files on disk take together.
    ///
    /// After ``flush()`` returns, it never exceeds the builder's `maxDiskBytes`.
    public var diskBytes: Int { disk?.byteCount ?? 0 }

    /// The memory cost of the values in memory: the sum of their serialized sizes when
    /// `maxRamCost` is set, else 0.
    ///
    /// It never exceeds `maxRamCost`.
    public var memoryCost: Int { engine.ramCost == nil ? 0 : memory?.totalCost ?? 0 }

    /// What the cache has done since it was built, and what its disk level holds now.
    public var statistics: CacheStatistics {
        reporter.statistics(diskCount: diskCount, diskBytes: diskBytes)
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
    /// With a shared level (``CacheBuilder/sharedLevel(_:)``), it also waits until the level has
    /// acknowledged every write, removal and clear made before the call: each key there holds the
    /// state it had in this cache when `flush()` was called, or a later one, even when a later set
    /// replaced a queued write or a clear dropped it.
    ///
    /// Files are written without `fsync`: they survive the process being killed, and a power loss
    /// can lose the last writes but never tear one (a torn file fails its checksum and is a miss).
    public func flush() async {
        await disk?.flush()
        await engine.shared?.flush()
    }

    /// Blocks the calling thread until every set and removal made before the call is on disk, and
    /// the eviction order is saved: ``flush()`` for synchronous code.
    ///
    /// For termination and background handlers, and other code that cannot await. The wait runs on
    /// Hoard's own executor, never on the cooperative thread pool.
    ///
    /// - Precondition: Not called from code that the cache's background writer runs (a serializer
    ///   of a background write, a disk-eviction or failed-write callback of a cache on the same
    ///   container): it would wait for itself, so it stops the program with a message instead of
    ///   hanging. Start `Task { await cache.flush() }` there.
    @available(*, noasync, message: "From async code, use flush().")
    public func flushAndWait() {
        guard disk != nil || engine.shared != nil else { return }
        precondition(
            disk?.isRunningOnWriter != true,
            "flushAndWait() was called on the background writer of its own cache (from a serializer or a "
                + "disk callback): it would wait for itself. Use Task { await cache.flush() } there."
        )
        _ = FetchTask.runAndWait { [self] in await flush() }
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
