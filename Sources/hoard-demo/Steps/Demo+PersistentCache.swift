import Foundation
import Hoard

extension Demo {
    // MARK: 1 + 2

    static func persistentCacheAndTimings() async throws {
        section(1, "A Cache<Article> in front of a slow fetcher")
        let key = "swift-concurrency"
        let fetchCalls = Counter()
        let builder = CacheBuilder<Article>()
            .containerName("articles")  // a folder inside demoDirectory
            .directory(demoDirectory)  // the default; written out to show where it is
            .maxRamCount(100)
            .maxDiskCount(1_000)
            .fetcher(slowFetcher(counting: fetchCalls))
        explain("CacheBuilder<Article>().containerName(\"articles\").fetcher { … 200 ms … }.build()")

        // Did a previous run leave the article on disk? Ask a cache with its memory level turned off
        // (maxRamCount 0), so this look doesn't warm the memory of the cache used below.
        let probe = try CacheBuilder<Article>().containerName("articles").directory(demoDirectory).maxRamCount(0)
            .build()
        let probeStart = clock.now
        let previous = probe.value(forKey: key)
        let probeTime = clock.now - probeStart
        if let previous {
            let age = Date().timeIntervalSince(previous.fetchedAt)
            explain(
                "At startup: \"\(key)\" was FOUND ON DISK from a previous run (fetched \(String(format: "%.0f", age)) s ago; read in \(probeTime.readable))."
            )
        } else {
            explain("At startup: \"\(key)\" is not cached yet (looked in \(probeTime.readable)).")
        }

        section(2, "Network vs memory vs disk")
        var cache: Cache<Article>? = try builder.build()

        // First call: memory miss → disk → fetcher.
        var start = clock.now
        let first = try await cache!.getOrFetch(forKey: key)
        let firstTime = clock.now - start
        let firstSource = fetchCalls.count == 1 ? "network (the fetcher ran)" : "disk (left by a previous run)"
        explain("getOrFetch #1 → \"\(first.title)\" in \(firstTime.readable), from the \(firstSource)")

        // Second call: the value is in this cache's memory now.
        start = clock.now
        _ = try await cache!.getOrFetch(forKey: key)
        let memoryTime = clock.now - start
        explain("getOrFetch #2 → \(memoryTime.readable), from memory")

        // Make the background disk write durable, then drop this cache (and its memory level).
        start = clock.now
        await cache!.flush()
        explain("flush() → every pending disk write is on disk (\((clock.now - start).readable))")
        cache = nil

        // A brand-new cache on the same container has an empty memory, so it reads from disk.
        let reopened = try builder.build()
        start = clock.now
        let fromDisk = try await reopened.getOrFetch(forKey: key)
        let diskTime = clock.now - start
        explain(
            "new cache on \"articles\": getOrFetch #3 → \(diskTime.readable), from disk (same article: \(fromDisk == first))"
        )
        explain("fetcher calls this run: \(fetchCalls.count)")

        print("")
        explain("  \(padded("source", 34)) time")
        explain("  \(padded("#1 " + firstSource, 34)) \(firstTime.readable)")
        explain("  \(padded("#2 memory", 34)) \(memoryTime.readable)")
        explain("  \(padded("#3 disk (new cache, same folder)", 34)) \(diskTime.readable)")
        if previous != nil {
            explain("No network this run: the first run's fetch took about 200 ms here.")
            explain("Delete \(demoDirectory.appendingPathComponent("articles").path) to see it again.")
        }
    }
}
