/// What a cache did with the invalidations it received and with its fills, for the benchmark that
/// explains a coherent cache's hit rate.
///
/// Counted on the invalidation and fill paths only (each already takes a key stripe's lock and waits
/// for the shared level or the fetcher), never on a memory or disk hit.
package struct CoherenceTally: Sendable, Equatable {
    /// Invalidations that dropped a value the cache held in memory: each costs a later read a miss.
    package var droppedHeld = 0
    /// Invalidations of a key the cache did not hold in memory.
    package var droppedNotHeld = 0
    /// Invalidations deferred while the cache's own write of the key was queued or under way (handed
    /// back, and counted again, once the write is made).
    package var deferred = 0
    /// Invalidations that may be the echo of the cache's own last write: the copies stay while the
    /// key is read back (a failed check comes back as another invalidation, counted again).
    package var echoChecks = 0
    /// Echo checks that found the server holding the bytes the cache wrote (those checked, or a
    /// newer write's): the copies stayed.
    package var echoesConfirmed = 0
    /// Fills (a value read from the shared level, or fetched) put into the local levels.
    package var fillsInstalled = 0
    /// Fills not installed because their key changed (or a clear was made) while they were in flight.
    package var fillsRejectedChanged = 0
    /// Fills installed although a key sharing their key's finer change count (one of 1 024) changed
    /// while they were in flight: the fills a check of that count would have rejected.
    package var fillsKeptDespiteSharedCount = 0
    /// Fills not installed because the cache's own write of the key was queued or under way.
    package var fillsRejectedOwnWrite = 0
    /// Fills not installed because the coherence gate was closed.
    package var fillsBypassed = 0

    package init() {}
}

extension Cache {
    /// What the cache did with its invalidations and fills so far (see ``CoherenceTally``).
    package var coherenceTally: CoherenceTally { engine.stripes.tally.withLock { $0 } }
}
