// hoard-demo — a guided tour of Hoard's object cache.
//
//     swift run hoard-demo
//
// Runs in a few seconds, needs no arguments and no network. Run it twice: the second run finds on
// disk the article that the first run fetched.
//
// This is a `@main` type rather than top-level code on purpose: in top-level `main.swift` code Swift
// picks the blocking (`noasync`) overload of `getOrFetch(forKey:)`, while here `try await` picks the
// async one.

import Foundation
import Hoard

// MARK: - The value we cache

/// A small Codable value: Hoard stores it as JSON on disk without any extra code.
struct Article: Codable, Sendable, Equatable {
    let id: String
    let title: String
    let fetchedAt: Date
}

// MARK: - Helpers

/// A thread-safe counter: fetchers and delegates run on Hoard's threads, not ours.
final class Counter: @unchecked Sendable {
    // Safe because `value` is only read or written while holding `lock`.
    private let lock = NSLock()
    private var value = 0

    /// Adds one and returns the new count.
    @discardableResult
    func increment() -> Int {
        lock.lock()
        defer { lock.unlock() }
        value += 1
        return value
    }

    var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return value
    }
}

/// A value shared with Hoard's threads, read and changed under a lock.
final class Locked<State: Sendable>: @unchecked Sendable {
    // Safe because `state` is only read or written while holding `lock`.
    private let lock = NSLock()
    private var state: State

    init(_ state: State) { self.state = state }

    func withLock<Result>(_ body: (inout State) -> Result) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return body(&state)
    }
}

/// The error our pretend network throws.
struct NetworkError: Error, CustomStringConvertible {
    let attempt: Int
    var description: String { "NetworkError(attempt \(attempt): connection reset)" }
}

extension Duration {
    /// `512 µs` below a millisecond, `201.3 ms` above.
    var readable: String {
        let (seconds, attoseconds) = components
        let microseconds = Double(seconds) * 1_000_000 + Double(attoseconds) / 1_000_000_000_000
        if microseconds < 1_000 { return String(format: "%.0f µs", microseconds) }
        return String(format: "%.1f ms", microseconds / 1_000)
    }
}

let clock = ContinuousClock()

func section(_ number: Int, _ title: String) {
    print("\n━━ \(number). \(title) " + String(repeating: "━", count: max(3, 66 - title.count)))
}

func explain(_ text: String) {
    print("   " + text)
}

func padded(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
}

/// A folder for the demo's containers that survives between runs.
let demoDirectory = CacheBuilder<Article>.defaultDirectory

/// A slow fetcher: pretends to download an article in about 200 ms, counting its calls.
func slowFetcher(counting calls: Counter) -> @Sendable (String) async throws -> Article {
    { key in
        calls.increment()
        try await Task.sleep(for: .milliseconds(200))  // simulated network latency
        return Article(id: key, title: "All about \(key)", fetchedAt: Date())
    }
}

// MARK: - Delegates

/// Prints what the cache evicts.
///
/// Hoard holds its delegate weakly: keep a strong reference yourself.
final class EvictionPrinter: CacheDelegate, Sendable {
    typealias Value = Article

    func cache(_ cache: Cache<Article>, willEvictFromMemory value: Article, forKey key: String) {
        print("     ↳ delegate: willEvictFromMemory  \"\(key)\" (\(value.title))")
    }

    func cache(_ cache: Cache<Article>, willEvictFromDiskForKey key: String) {
        print("     ↳ delegate: willEvictFromDiskForKey \"\(key)\"")
    }

    func cacheWillClearMemory(_ cache: Cache<Article>) {
        print("     ↳ delegate: cacheWillClearMemory")
    }

    func cacheWillClearDisk(_ cache: Cache<Article>) {
        print("     ↳ delegate: cacheWillClearDisk")
    }
}

/// Supplies a placeholder when every fetch attempt failed (returned to the caller, not stored).
final class FallbackProvider: CacheDelegate, Sendable {
    typealias Value = Article

    func cache(_ cache: Cache<Article>, didFailToFetchForKey key: String, error: any Error) -> Article? {
        print("     ↳ delegate: didFailToFetchForKey \"\(key)\" — returning a placeholder")
        return Article(id: key, title: "Offline placeholder for \(key)", fetchedAt: Date())
    }
}

// MARK: - The walkthrough

@main
struct Demo {
    static func main() async throws {
        print("Hoard demo — a memory + disk object cache with fetching")
        print("Containers live in \(demoDirectory.path)")

        try await persistentCacheAndTimings()
        try await evictionCallbacks()
        try await requestPooling()
        try await retriesAndErrors()
        try await callbackAndBlockingForms()
        try await freshnessBudgetsAndEvents()

        print("\nDone. Run `swift run hoard-demo` again: step 2 will find the article on disk.")
        print("To start over, delete \(demoDirectory.appendingPathComponent("articles").path)")
    }

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

    // MARK: 3

    static func evictionCallbacks() async throws {
        section(3, "Eviction callbacks (maxRamCount 3, maxDiskCount 5)")
        let printer = EvictionPrinter()  // held weakly by the cache: this constant keeps it alive
        let cache = try CacheBuilder<Article>()
            .containerName("demo-eviction")
            .directory(demoDirectory)
            .maxRamCount(3)
            .maxDiskCount(5)  // default policy .lfu: every post is set once, so the oldest goes first
            .delegate(printer)
            .build()
        explain("removeAll() so every run starts empty (it announces both clears):")
        cache.removeAll()

        explain("Setting 8 articles; memory keeps 3, so each set past the third evicts one from memory:")
        for number in 1...8 {
            let key = "post-\(number)"
            print("   set \"\(key)\"")
            cache[key] = Article(id: key, title: "Post number \(number)", fetchedAt: Date())
        }
        explain("flush(): the background writer lands the 8 files; disk keeps 5, so 3 are evicted:")
        await cache.flush()
        explain("memoryCount = \(cache.memoryCount), diskCount = \(cache.diskCount)")
        let post1 = cache["post-1"]
        explain("cache[\"post-1\"] → \(post1?.title ?? "nil") (evicted from both levels)")
        explain("cache[\"post-5\"] is on disk only; reading it copies it back into memory, which evicts another:")
        let post5 = cache["post-5"]
        explain(
            "cache[\"post-5\"] → \(post5?.title ?? "nil"); memoryCount = \(cache.memoryCount), diskCount = \(cache.diskCount)"
        )
        withExtendedLifetime(printer) {}
    }

    // MARK: 4

    static func requestPooling() async throws {
        section(4, "50 concurrent getOrFetch calls, one fetch")
        let fetchCalls = Counter()
        let cache = try CacheBuilder<Article>()
            .containerName("demo-pooling")
            .directory(demoDirectory)
            .fetcher(slowFetcher(counting: fetchCalls))
            .build()
        cache.removeAll()

        let start = clock.now
        let titles = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<50 {
                group.addTask { try await cache.getOrFetch(forKey: "breaking-news").title }
            }
            var titles: [String] = []
            for try await title in group { titles.append(title) }
            return titles
        }
        let elapsed = clock.now - start
        explain(
            "\(titles.count) callers got \"\(titles[0])\" (all the same: \(Set(titles).count == 1)) in \(elapsed.readable)"
        )
        explain("fetcher calls: \(fetchCalls.count) — concurrent requests for one key share one fetch")
    }

    // MARK: 5

    static func retriesAndErrors() async throws {
        section(5, "Retries, CacheError and a delegate fallback")
        // Hoard is silent by default; its logger reports each retry. Turned on for this step only.
        HoardLogger.output = { message, level in
            if level >= .info { print("     [hoard \(level)] \(message)") }
        }
        defer { HoardLogger.output = nil }

        // a) Fails twice, then succeeds.
        let attempts = Counter()
        let flaky = try CacheBuilder<Article>()
            .containerName("demo-retries")
            .directory(demoDirectory)
            .fetcher { key in
                let attempt = attempts.increment()
                if attempt <= 2 {
                    print("   fetcher attempt \(attempt): failing")
                    throw NetworkError(attempt: attempt)
                }
                print("   fetcher attempt \(attempt): succeeding")
                return Article(id: key, title: "Third time lucky", fetchedAt: Date())
            }
            .maxRetryCount(3)  // up to 3 retries after the first attempt
            .retryBackoff(.constant(.milliseconds(50)))
            .build()
        flaky.removeAll()
        explain("a) a fetcher that fails twice, with .maxRetryCount(3) and a 50 ms backoff:")
        var start = clock.now
        let article = try await flaky.getOrFetch(forKey: "flaky")
        explain("→ \"\(article.title)\" after \(attempts.count) attempts in \((clock.now - start).readable)")

        // b) Always fails.
        let downAttempts = Counter()
        let alwaysFails = try CacheBuilder<Article>()
            .containerName("demo-retries-down")
            .directory(demoDirectory)
            .fetcher { _ in
                let attempt = downAttempts.increment()
                print("   fetcher attempt \(attempt): failing")
                throw NetworkError(attempt: attempt)
            }
            .maxRetryCount(2)
            .build()
        alwaysFails.removeAll()
        explain("b) a fetcher that always fails, with .maxRetryCount(2):")
        start = clock.now
        do {
            _ = try await alwaysFails.getOrFetch(forKey: "offline")
            explain("unexpected: it succeeded")
        } catch let error as CacheError where error.code == .fetchFailed {
            explain("→ caught CacheError in \((clock.now - start).readable)")
            explain("   code: \(error.code), key: \(error.key ?? "-"), attempts: \(error.attempts ?? 0)")
            explain("   underlyingError: \(error.underlyingError.map { "\($0)" } ?? "nil")")
        }

        // c) Same cache, now with a delegate that supplies a fallback.
        let fallback = FallbackProvider()  // held weakly: keep it alive while the cache uses it
        alwaysFails.delegate = fallback
        explain("c) the same cache with a delegate that supplies a fallback:")
        let placeholder = try await alwaysFails.getOrFetch(forKey: "offline")
        explain(
            "→ \"\(placeholder.title)\"; stored? \(alwaysFails.value(forKey: "offline") != nil) (fallbacks are not cached)"
        )
        withExtendedLifetime(fallback) {}
    }

    // MARK: 6

    static func callbackAndBlockingForms() async throws {
        section(6, "The callback form and the blocking form")
        let fetchCalls = Counter()
        let cache = try CacheBuilder<Article>()
            .containerName("demo-forms")
            .directory(demoDirectory)
            .fetcher(slowFetcher(counting: fetchCalls))
            .build()
        cache.removeAll()

        // asyncGet(forKey:onComplete:) calls back once, on a Hoard background thread.
        var start = clock.now
        let result = await withCheckedContinuation {
            (continuation: CheckedContinuation<Result<Article, any Error>, Never>) in
            cache.asyncGet(forKey: "callbacks") { result in
                continuation.resume(returning: result)
            }
        }
        switch result {
        case .success(let article):
            explain("asyncGet(forKey:onComplete:) → .success(\"\(article.title)\") in \((clock.now - start).readable)")
        case .failure(let error):
            explain("asyncGet(forKey:onComplete:) → .failure(\(error))")
        }

        // The blocking getOrFetch(forKey:) is for synchronous code: call it from a plain thread, and
        // resume this task when that thread has its answer (no sleeping, no polling).
        start = clock.now
        let blocking = await withCheckedContinuation {
            (continuation: CheckedContinuation<(Result<Article, any Error>, Bool), Never>) in
            let thread = Thread {
                let result = Result { try cache.getOrFetch(forKey: "blocking") }  // blocks this thread only
                continuation.resume(returning: (result, Thread.isMainThread))
            }
            thread.name = "demo-blocking-caller"
            thread.start()
        }
        switch blocking.0 {
        case .success(let article):
            explain(
                "blocking getOrFetch on a plain Thread (main thread: \(blocking.1)) → \"\(article.title)\" in \((clock.now - start).readable)"
            )
        case .failure(let error):
            explain("blocking getOrFetch → error \(error)")
        }

        // The synchronous helper below hides the blocking call from async code; again on a thread.
        start = clock.now
        let again = await withCheckedContinuation { (continuation: CheckedContinuation<String, Never>) in
            Thread { continuation.resume(returning: titleBlocking(cache, "blocking")) }.start()
        }
        explain("blocking again, via a sync helper → \"\(again)\" in \((clock.now - start).readable) (memory hit)")
        explain("fetcher calls: \(fetchCalls.count)")
    }

    /// Synchronous code calling the blocking form.
    static func titleBlocking(_ cache: Cache<Article>, _ key: String) -> String {
        (try? cache.getOrFetch(forKey: key).title) ?? "error"
    }

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
