/// What a cache has done since it was built: hits, misses, fetches and evictions, and what it holds.
///
/// Read it with ``Cache/statistics``; each read is a consistent snapshot of the counters. The counts
/// are this cache object's own. Other caches on the same container keep theirs, and disk evictions
/// are counted by the cache whose write made room necessary.
public struct CacheStatistics: Sendable, Hashable {
    /// Reads served by the memory level.
    public var memoryHits = 0
    /// Reads served by the disk level (an entry file or a write still pending).
    public var diskHits = 0
    /// Reads that found no live value in memory or on disk (an expired value is a miss).
    public var misses = 0
    /// Values read from the shared level (``CacheBuilder/sharedLevel(_:)``) after memory and disk
    /// missed.
    public var sharedHits = 0
    /// Reads of the shared level that found nothing usable (absent, expired, or not this cache's).
    public var sharedMisses = 0
    /// Reads and writes the shared level failed (a server down, a timeout); each read that failed was
    /// served as a miss.
    public var sharedErrors = 0
    /// Keys the shared level announced as changed (``CacheBuilder/coherence(_:)``), each dropped from
    /// memory and disk (or, while this cache's own write of it was under way, once that was made; or
    /// kept, when it was the echo of this cache's own write and the key still holds what it wrote).
    public var invalidations = 0
    /// Times every local copy was dropped because the shared level's announcements could not be
    /// trusted (tracking lost, or the server flushed), with ``CacheBuilder/coherence(_:)``.
    public var coherenceFlushes = 0
    /// Calls made to the fetcher: every attempt counts, retries included.
    public var fetches = 0
    /// Fetches that failed after every attempt (before any delegate fallback).
    public var fetchFailures = 0
    /// Values the memory level removed on its own: to make room, because they expired, or under
    /// memory pressure.
    public var memoryEvictions = 0
    /// Entries the disk level removed on its own: to stay within its limits, or because they expired.
    public var diskEvictions = 0
    /// Evictions from either level by why they happened; a reason that never happened is absent.
    public var evictionsByReason: [EvictionReason: Int] = [:]
    /// The number of entry files on disk now.
    public var diskCount = 0
    /// The bytes the entry files on disk take together now.
    public var diskBytes = 0

    /// Every eviction, from either level.
    public var evictions: Int { memoryEvictions + diskEvictions }

    /// The evictions, from either level, that happened for `reason`.
    public func evictions(for reason: EvictionReason) -> Int { evictionsByReason[reason] ?? 0 }

    /// Creates statistics with every count at 0.
    public init() {}
}
