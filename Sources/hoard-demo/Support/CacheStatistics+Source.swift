import Hoard

extension CacheStatistics {
    /// Which level answered one read, from what the cache counted before and after it.
    ///
    /// Counted sources rather than measured times: the same on every run.
    ///
    /// - Parameter before: The statistics taken just before the read.
    /// - Returns: `network`, `disk`, `memory`, or `nowhere` for a miss.
    func source(since before: CacheStatistics) -> String {
        if fetches > before.fetches { return "the network (the fetcher ran)" }
        if diskHits > before.diskHits { return "disk" }
        if memoryHits > before.memoryHits { return "memory" }
        return "nowhere"
    }
}
