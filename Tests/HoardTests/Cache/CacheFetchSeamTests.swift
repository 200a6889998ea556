import Dispatch
import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Where the fetch path meets the delegate, the events, the eviction callbacks and the three call
/// forms: pairs the other suites do not cover.
@Suite(.timeLimit(.minutes(10)), .validatesCacheInvariants)
struct CacheFetchSeamTests {
    private struct Down: Error {}

    /// The blocking form is "the same as the async getOrFetch": one call that misses both levels
    /// and fetches is one miss, in the statistics and on the event stream, as the async form counts it.
    @Test func aBlockingGetThatFetchesCountsOneMissAndSendsOneMissEvent() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().fetcher { "fetched \($0)" }.build()
        let events = cache.events
        let value = await onPlainThread { try? cache.getOrFetchAndWait(forKey: "k") }
        #expect(value == "fetched k")
        cache.removeValue(forKey: "end")
        let seen = await events.collect(through: { $0 == .removed(key: "end") })
        #expect(seen == [.miss(key: "k"), .set(key: "k", value: "fetched k"), .removed(key: "end")])
        #expect(cache.statistics.misses == 1)
        #expect(cache.statistics.fetches == 1)
    }

    /// The blocking form reads the shared level without a fetcher, as the async form does.
    ///
    /// A cache over a shared level needs no fetcher: `getOrFetch` reads the shared level after a
    /// local miss. The blocking form, "the same as the async getOrFetch", must read it too.
    @Test func aBlockingGetReadsTheSharedLevelWithoutAFetcherAsTheAsyncFormDoes() async throws {
        let folder = TemporaryDirectory()
        let shared = FakeSharedLevel()
        let writer = try folder.stringBuilder("a").sharedLevel(shared).build()
        writer["k"] = "from the first"
        await writer.flush()
        #expect(shared.values["k"] != nil)

        let reader = try folder.stringBuilder("b").sharedLevel(shared).build()
        let blocking = await onPlainThread { Result { try reader.getOrFetchAndWait(forKey: "k") } }
        #expect((try? blocking.get()) == "from the first", "blocking form: \(blocking)")
        // The async form, for comparison, on a key the reader has not filled yet.
        writer["k2"] = "second"
        await writer.flush()
        #expect(try await reader.getOrFetch(forKey: "k2") == "second")
    }

    /// A caller cancelled while the failure callback runs gets `CancellationError`.
    ///
    /// "A cancelled caller of getOrFetch stops waiting at once and gets CancellationError", while
    /// the delegate may fetch (even block on a fetch) from `didFailToFetchForKey`. A caller cancelled
    /// while that callback runs must get `CancellationError`, not the fallback the callback returns
    /// long after.
    @Test func aCallerCancelledWhileTheFailureCallbackRunsGetsCancellationError() async throws {
        let folder = TemporaryDirectory()
        let delegate = RecordingDelegate<String>()
        delegate.setFallback("fallback", forKey: "k")
        let inCallback = Gate()
        let release = DispatchSemaphore(value: 0)
        delegate.onEvent = { _, event in
            guard case .fetchFailure = event else { return }
            inCallback.open()
            release.wait()  // a slow fallback: a nested fetch, a network call
        }
        let cache = try folder.stringBuilder().delegate(delegate).fetcher { _ in throw Down() }.build()
        let caller = Task { try await cache.getOrFetch(forKey: "k") }
        try await inCallback.wait()
        caller.cancel()
        // `cancel()` has run the caller's cancellation handler: from here on it has stopped waiting,
        // whatever the callback, still blocked, returns once let go.
        release.signal()
        let result = await caller.result
        #expect(throws: CancellationError.self) { try result.get() }
    }

    /// "A read made from cache(_:willEvictFromMemory:forKey:) is not copied back into memory, which
    /// would evict another entry and call the delegate again." The callback form of the read, made
    /// from that callback, must not copy either.
    @Test func anAsyncGetFromAnEvictionCallbackDoesNotCopyTheEvictedValueBackIntoMemory() async throws {
        let folder = TemporaryDirectory()
        let delegate = RecordingDelegate<String>()
        let cache = try folder.stringBuilder().maxRamCount(1).evictionPolicy(.lru).delegate(delegate).build()
        cache["a"] = "1"
        await cache.flush()
        let answered = Gate()
        let answer = Protected<String?>(nil)
        let armed = Counter()
        delegate.onEvent = { cache, event in
            guard case .memoryEviction(let key) = event, armed.increment() == 1 else { return }
            cache.asyncGet(forKey: key) { result in
                answer.withLock { $0 = try? result.get() }
                answered.open()
            }
        }
        await onPlainThread { cache["b"] = "2" }  // evicts "a" from memory; it stays on disk
        try await answered.wait()
        #expect(answer.withLock { $0 } == "1")  // the read itself works
        #expect(delegate.memoryEvictions == ["a"], "evictions: \(delegate.memoryEvictions)")
        #expect(cache.memory?.peek("b")?.value == "2")
        #expect(cache.memory?.peek("a") == nil)
    }

    /// A fetcher that blocks its thread (a synchronous client) runs on Hoard's executor: more such
    /// fetches than there are cores all run at once, and other tasks still run meanwhile.
    @Test func fetchersThatBlockTheirThreadsStarveNeitherEachOtherNorOtherTasks() async throws {
        let folder = TemporaryDirectory()
        let entered = Counter()
        let release = ThreadGate()
        let cache = try folder.stringBuilder().fetcher { key in
            entered.increment()
            release.wait()
            return "fetched \(key)"
        }.build()
        let count = ProcessInfo.processInfo.activeProcessorCount + 2
        let fetches = (0..<count).map { index in Task { try await cache.getOrFetch(forKey: "k\(index)") } }
        #expect(await waitUntil { entered.value == count })
        #expect(await Task.detached { 42 }.value == 42)
        release.open()
        for (index, fetch) in fetches.enumerated() { #expect(try await fetch.value == "fetched k\(index)") }
    }

    /// "A value fetched while the key was set or removed is returned to its callers but not stored:
    /// the later change wins", with one level off.
    @Test(arguments: ["memory only", "disk only"])
    func aSetDuringAFetchWinsWithOneLevelOff(levels: String) async throws {
        let folder = TemporaryDirectory()
        let gate = Gate()
        let calls = Counter()
        var builder = folder.stringBuilder().fetcher { _ in
            calls.increment()
            try await gate.wait()
            return "fetched"
        }
        builder = levels == "memory only" ? builder.maxDiskCount(0) : builder.maxRamCount(0)
        let cache = try builder.build()
        let fetch = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { calls.value == 1 })
        cache["k"] = "new"
        gate.open()
        #expect(try await fetch.value == "fetched")
        await cache.flush()
        #expect(cache["k"] == "new")
        #expect(try await cache.getOrFetch(forKey: "k") == "new")
    }

    /// A fetcher that throws `CancellationError` while nobody cancelled the fetch failed like any
    /// other error: it is retried, counted and reported to the delegate.
    @Test func aCancellationErrorFromAFetchNobodyCancelledIsRetriedAndReported() async throws {
        let folder = TemporaryDirectory()
        let delegate = RecordingDelegate<String>()
        delegate.setFallback("fallback", forKey: "k")
        let calls = Counter()
        let cache = try folder.stringBuilder().delegate(delegate).maxRetryCount(2).fetcher { _ in
            calls.increment()
            throw CancellationError()
        }.build()
        #expect(try await cache.getOrFetch(forKey: "k") == "fallback")
        #expect(calls.value == 3)
        #expect(delegate.events == [.fetchFailure("k")])
        #expect(cache.statistics.fetches == 3)
        #expect(cache.statistics.fetchFailures == 1)
    }

    /// A set made while a caller's disk read is under way, then evicted from memory before the
    /// shared fetch begins: the fetch's "a set may have stored the value since the caller looked"
    /// check only looks at memory.
    @Test func aSetEvictedFromMemoryBeforeTheFetchBeginsIsNotOverwrittenByIt() async throws {
        let folder = TemporaryDirectory()
        let clock = ManualClock()
        let serializer = GatedDeserializer()
        let calls = Counter()
        let cache = try CacheBuilder<String>(serializer: serializer).containerName("test").directory(folder.url)
            .maxRamCount(1).evictionPolicy(.lru).clock(clock.read).serveStaleOnFetchFailure(true)
            .fetcher { _ in
                calls.increment()
                return "fetched"
            }.build()
        cache.set("old", forKey: "k", expiry: .seconds(5))
        await cache.flush()
        cache.clearMemory()
        clock.advance(by: 10)
        serializer.armed.withLock { $0 = true }
        let caller = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { serializer.waiting.value == 1 })  // reading the expired "old"
        serializer.armed.withLock { $0 = false }
        cache["k"] = "new"
        cache["x"] = "x"  // evicts "k" from memory; "new" is on its way to disk
        serializer.gate.open()
        let got = try await caller.value
        await cache.flush()
        #expect(cache["k"] == "new", "the caller got \(got); the fetcher ran \(calls.value) times")
    }
}
