import Foundation
import Hoard

extension Demo {
    // MARK: 1 + 2

    /// Steps 1 and 2: a cache whose container stays between runs, and which level answers each read.
    static func persistentCache() async throws {
        section(1, "A Cache<Article> in front of a slow fetcher")
        let key = "swift-concurrency"
        let network = SlowNetwork()
        let builder = CacheBuilder<Article>()
            .containerName("articles")  // a folder inside demoDirectory
            .directory(demoDirectory)  // the default; written out to show where it is
            .maxRamCount(100)
            .maxDiskCount(1_000)
            .fetcher { key in try await network.get(key) }
        explain("CacheBuilder<Article>().containerName(\"articles\").fetcher { … 200 ms … }.build()")

        // Did a previous run leave the article on disk? Ask a cache with its memory level turned off
        // (maxRamCount 0), so this look doesn't warm the memory of the cache used below.
        let probe = try CacheBuilder<Article>().containerName("articles").directory(demoDirectory).maxRamCount(0)
            .build()
        let previous = probe.value(forKey: key)
        if previous != nil {
            explain("At startup: \"\(key)\" was FOUND ON DISK, left by a previous run.")
        } else {
            explain("At startup: \"\(key)\" is not cached yet.")
        }

        section(2, "Network vs memory vs disk")
        var cache: Cache<Article>? = try builder.build()

        // First call: memory miss → disk → fetcher.
        var before = cache!.statistics
        let first = try await cache!.getOrFetch(forKey: key)
        explain("getOrFetch #1 → \"\(first.title)\", from \(cache!.statistics.source(since: before))")

        // Second call: the value is in this cache's memory now.
        before = cache!.statistics
        _ = try await cache!.getOrFetch(forKey: key)
        explain("getOrFetch #2 → from \(cache!.statistics.source(since: before))")

        // Make the background disk write durable, then drop this cache (and its memory level).
        await cache!.flush()
        explain("flush() → every pending disk write is on disk")
        cache = nil

        // A brand-new cache on the same container has an empty memory, so it reads from disk.
        let reopened = try builder.build()
        before = reopened.statistics
        let fromDisk = try await reopened.getOrFetch(forKey: key)
        explain(
            "new cache on \"articles\": getOrFetch #3 → from \(reopened.statistics.source(since: before)) (same article: \(fromDisk == first))"
        )
        explain("fetcher calls this run: \(network.calls.count)")
        if previous != nil {
            explain("No network this run: the first run fetched the article and left it on disk.")
            explain("Delete \(displayPath(articlesFolder)) to see the fetch again.")
        }
        await reopened.flush()  // the disk hit moved the eviction order: save it now
    }
}
