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
    /// Reads that found the value in neither level.
    public var misses = 0
    /// Calls made to the fetcher: every attempt counts, retries included.
    public var fetches = 0
    /// Fetches that failed after every attempt (before any delegate fallback).
    public var fetchFailures = 0
    /// Values the memory level removed to make room.
    public var memoryEvictions = 0
    /// Entries the disk level removed to stay within its limits.
    public var diskEvictions = 0
    /// The number of entry files on disk now.
    public var diskCount = 0
    /// The bytes the entry files on disk take together now.
    public var diskBytes = 0

    /// Every eviction, from either level.
    public var evictions: Int { memoryEvictions + diskEvictions }

    /// Creates statistics with every count at 0.
    public init() {}
}
