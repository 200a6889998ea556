import Foundation
import Hoard

extension Demo {
    // MARK: 7

    static func freshnessBudgetsAndEvents() async throws {
        section(7, "Expiry, stale values when offline, a memory budget, and the event stream")
        // A clock the demo moves by hand, so nothing waits for real time to pass.
        let now = Locked(Date())
        let online = Locked(true)
        let calls = Counter()
        let cache = try CacheBuilder<Article>()
            .containerName("demo-freshness")
            .directory(demoDirectory)
            .expiry(.seconds(60))
            .serveStaleOnFetchFailure(true)
            .maxRamCost(4_096)  // serialized bytes kept in memory
            .clock { now.withLock { $0 } }
            .fetcher { key in
                _ = calls.increment()
                guard online.withLock({ $0 }) else { throw URLError(.notConnectedToInternet) }
                return Article(id: key, title: "Fresh \(key)", fetchedAt: now.withLock { $0 })
            }
            .build()
        cache.removeAll()
        let events = cache.events  // subscribe before acting: a subscription sees what follows
        let printer = Task {
            for await event in events {
                print("   event: \(describe(event))")
                if case .removed(key: "demo-end") = event { break }
            }
        }

        explain("getOrFetch fetches, and the value lives 60 s (the builder's default expiry):")
        _ = try await cache.getOrFetch(forKey: "news")
        explain("61 s later (on the injected clock), the value is expired: the subscript misses.")
        now.withLock { $0 += 61 }
        explain("cache[\"news\"] → \(cache["news"]?.title ?? "nil")")
        explain("Offline now: getOrFetch fails to fetch, and serves the stale value instead:")
        online.withLock { $0 = false }
        let stale = try await cache.getOrFetch(forKey: "news")
        let entry = cache.entry(forKey: "news")
        explain("→ \"\(stale.title)\", entry(forKey:).isExpired = \(entry?.isExpired ?? false)")
        online.withLock { $0 = true }

        explain("A per-entry expiry of 5 s, then the sweep once it has passed:")
        cache.set(Article(id: "flash", title: "Flash sale", fetchedAt: Date()), forKey: "flash", expiry: .seconds(5))
        await cache.flush()  // the sweep leaves writes that have not landed for a later sweep
        now.withLock { $0 += 5 }
        cache.removeExpired()
        let expired = cache.statistics.evictions(for: .expired)
        explain("contains(\"flash\") = \(cache.contains("flash")); evictions for expiry so far: \(expired)")
        explain("memoryCost = \(cache.memoryCost) of 4 096 bytes; fetcher called \(calls.count) times")
        cache.removeValue(forKey: "demo-end")
        await printer.value
    }

    static func describe(_ event: CacheEvent<Article>) -> String {
        switch event {
        case .set(let key, _): "set \"\(key)\""
        case .hit(let key, let level): "hit \"\(key)\" in \(level)"
        case .miss(let key): "miss \"\(key)\""
        case .evicted(let key, let level, let reason): "evicted \"\(key)\" from \(level) (\(reason))"
        case .servedStale(let key, _, let expiredAt): "served stale \"\(key)\" (expired at \(expiredAt))"
        case .removed(let key): "removed \"\(key)\""
        case .cleared(let level): "cleared \(level)"
        }
    }
}
