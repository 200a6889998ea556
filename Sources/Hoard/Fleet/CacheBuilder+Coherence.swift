import Foundation

extension CacheBuilder {
    /// Sets how the cache's memory and disk copies keep in step with its shared level, for fleets
    /// (default: not at all; each copy lives until its own expiry).
    ///
    /// ```swift
    /// let users = try CacheBuilder<User>()
    ///     .containerName("users")
    ///     .sharedLevel(try RedisCacheLevel(url: "redis://127.0.0.1:6379/0", namespace: "users"))
    ///     .coherence(.invalidations)
    ///     .build()
    /// ```
    /// - ``CacheCoherence/invalidations``: the shared level (one that can announce changes, as
    ///   `RedisCacheLevel`) announces every key another instance, or this one, sets, removes or lets expire there, and the cache
    ///   drops its local copies of it (of this cache's own write only if the key, read back, no
    ///   longer holds what it wrote). A fill from the shared level is installed only if no
    ///   invalidation of its key (and no loss of tracking) came while it was read. When tracking is
    ///   lost, the local copies keep serving until it is confirmed again and are dropped then
    ///   (``CacheCoherence/Outage/serveLocalCopies``), or are emptied at once and bypassed until then
    ///   (``CacheCoherence/Outage/bypassLocalCopies``). `build()` subscribes, and may wait up to the level's connect
    ///   timeout to learn whether the server can track; it empties the disk level, whose entries
    ///   were not tracked while no cache was open.
    /// - ``CacheCoherence/ttlOnly(maxAge:)``: no invalidations; local copies live at most `maxAge`.
    ///
    /// Either way a local copy lives at most ``CacheCoherence/maxLocalAge``, whatever its own expiry
    /// (the shared level keeps the value's own expiry): that bounds staleness if every other
    /// mechanism fails. Requires ``sharedLevel(_:)``.
    public func coherence(_ coherence: CacheCoherence) -> Self {
        var copy = self
        copy.coherence = coherence
        return copy
    }

    /// Checks the coherence options against the rest of the configuration.
    ///
    /// - Throws: ``CacheError`` with code `invalidConfiguration`.
    func checkCoherence() throws(CacheError) {
        guard let coherence else { return }
        guard let sharedLevel else {
            throw .invalidConfiguration(
                "coherence(_:) keeps local copies in step with a shared level: call .sharedLevel(…) too, "
                    + "or remove .coherence(…)."
            )
        }
        guard coherence.maxLocalAge > .zero else {
            throw .invalidConfiguration(
                "coherence's maximum local age must be more than zero, not \(coherence.maxLocalAge)."
            )
        }
        if coherence.tracksInvalidations, !(sharedLevel is any InvalidatingCacheLevel<String, Data>) {
            throw .invalidConfiguration(
                "coherence(.invalidations) needs a shared level that announces changes (an InvalidatingCacheLevel, "
                    + "such as RedisCacheLevel); \(type(of: sharedLevel)) does not. Use .coherence(.ttlOnly(maxAge:)) "
                    + "to bound how long local copies live instead."
            )
        }
    }

    /// Subscribes `cache` to its shared level's invalidations, with ``CacheCoherence/invalidations``.
    ///
    /// - Throws: ``CacheError`` with code `invalidConfiguration` when the level cannot track; it says
    ///   that `.ttlOnly(maxAge:)` is the fallback.
    func subscribeToInvalidations(_ cache: Cache<Value>) throws {
        guard let coherence, coherence.tracksInvalidations,
            let level = sharedLevel as? any InvalidatingCacheLevel<String, Data>
        else { return }
        // What the disk holds was not tracked while no cache was open on it.
        let cleared = cache.dropLocalCopies()
        do {
            let subscription = try level.subscribeToInvalidations { [weak cache] invalidation in
                cache?.handle(invalidation)
            }
            cache.invalidations.withLock { $0 = subscription }
            cache.servesUntilFirstTracked()
        } catch {
            // Not before the clear is done: begun by a build() that failed, it would remove what a
            // cache built next on the container writes, and empty that cache's memory.
            cleared.wait()
            guard let error = error as? CacheError, error.code == .invalidConfiguration else { throw error }
            throw CacheError.invalidConfiguration(
                error.message
                    + " coherence(.invalidations) cannot work with this server: use .coherence(.ttlOnly(maxAge:)), "
                    + "which bounds how long local copies live instead."
            )
        }
    }
}
