import Foundation
import Hoard

extension Demo {
    // MARK: 7

    /// Step 7: expiry on an injected clock, stale values served when offline, a memory budget, and
    /// the event stream.
    static func freshnessBudgetsAndEvents(in folder: URL) async throws {
        section(7, "Expiry, stale values when offline, a memory budget, and the event stream")
        // A clock the demo moves by hand, so nothing waits for real time to pass.
        let now = Locked(Date())
        let online = Locked(true)
        let calls = Counter()
        let cache = try CacheBuilder<Article>()
            .containerName("freshness")
            .directory(folder)
            .expiry(.seconds(60))
            .serveStaleOnFetchFailure(true)
            .maxRamCost(4_096)  // serialized bytes kept in memory
            .clock { now.withLock { $0 } }
            .fetcher { key in
                _ = calls.increment()
                guard online.withLock({ $0 }) else { throw URLError(.notConnectedToInternet) }
                return Article(id: key, title: "Fresh \(key)")
            }
            .build()
        // Subscribe before acting: a subscription sees what follows. Each action's events are then
        // printed right after it, in this task, in the order the cache emitted them.
        var events = StreamPrinter(cache.events) { $0.narration(now: now.withLock { $0 }) }

        explain("getOrFetch fetches, and the value lives 60 s (the builder's default expiry):")
        _ = try await cache.getOrFetch(forKey: "news")
        await events.printNext(2)  // the miss, then the fetched value's set
        // Wait for the background write: a read of the landed file counts as a disk access, a read of
        // the pending write does not, and the sweep below lists the disk in access order.
        await cache.flush()
        explain("61 s later (on the injected clock), the value is expired: the subscript misses.")
        now.withLock { $0 += 61 }
        let expired = cache["news"]
        await events.printNext(1)
        explain("cache[\"news\"] → \(expired?.title ?? "nil")")
        explain("Offline now: getOrFetch fails to fetch, and serves the stale value instead:")
        online.withLock { $0 = false }
        let stale = try await cache.getOrFetch(forKey: "news")
        await events.printNext(2)  // the miss, then the stale value served
        let entry = cache.entry(forKey: "news")
        explain("→ \"\(stale.title)\", entry(forKey:).isExpired = \(entry?.isExpired ?? false)")
        online.withLock { $0 = true }

        explain("A per-entry expiry of 5 s, then the sweep once it has passed:")
        cache.set(Article(id: "flash", title: "Flash sale"), forKey: "flash", expiry: .seconds(5))
        await events.printNext(1)
        await cache.flush()  // the sweep leaves writes that have not landed for a later sweep
        now.withLock { $0 += 5 }
        cache.removeExpired()
        await events.printNext(4)  // both keys, from memory, then from disk
        let expiredCount = cache.statistics.evictions(for: .expired)
        explain("contains(\"flash\") = \(cache.contains("flash")); evictions for expiry so far: \(expiredCount)")
        explain("memoryCost = \(cache.memoryCost) of 4 096 bytes; fetcher called \(calls.count) times")
        await cache.flush()  // nothing left to write once the scratch folder goes
    }
}
