import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

private struct FetchError: Error, Equatable {
    let attempt: Int
}

/// What most tests here start from: a cache in a fresh folder whose fetcher counts its calls, waits
/// until the test opens ``gate`` when it is gated, then answers.
private struct FetchSetup {
    /// The folder of the cache's container, removed with the setup.
    let folder: TemporaryDirectory
    /// How many times the fetcher was called.
    let calls: Counter
    /// What a gated fetcher waits for before it answers.
    let gate: Gate
    let cache: Cache<String>

    /// - Parameters:
    ///   - isGated: Whether each fetch waits for ``gate`` before it answers.
    ///   - configure: More settings for the builder (retries, a delegate).
    ///   - answer: The fetch's value or error, from the key and the call's number (1 for the first).
    /// - Throws: What building the cache throws.
    init(
        isGated: Bool = false,
        configure: (CacheBuilder<String>) -> CacheBuilder<String> = { $0 },
        answer: @escaping @Sendable (_ key: String, _ call: Int) async throws -> String
    ) throws {
        let (folder, calls, gate) = (TemporaryDirectory(), Counter(), Gate())
        cache = try configure(folder.stringBuilder()).fetcher { key in
            let call = calls.increment()
            if isGated { try await gate.wait() }
            return try await answer(key, call)
        }.build()
        (self.folder, self.calls, self.gate) = (folder, calls, gate)
    }
}

@Suite(.timeLimit(.minutes(10)), .validatesCacheInvariants)
struct CacheFetchingTests {
    @Test func fetchesOnAMissAndStoresInBothLevels() async throws {
        let setup = try FetchSetup { key, _ in "fetched \(key)" }
        let cache = setup.cache
        #expect(try await cache.getOrFetch(forKey: "a") == "fetched a")
        #expect(setup.calls.value == 1)
        #expect(cache.memoryCount == 1)
        await cache.flush()
        #expect(cache.diskCount == 1)
        // Memory, then disk, before the fetcher.
        #expect(try await cache.getOrFetch(forKey: "a") == "fetched a")
        cache.clearMemory()
        #expect(try await cache.getOrFetch(forKey: "a") == "fetched a")
        #expect(setup.calls.value == 1)
    }

    @Test func withoutAFetcherAMissIsNotFound() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().build()
        await #expect(throws: CacheError.notFound) { try await cache.getOrFetch(forKey: "missing") }
        do {
            _ = try await cache.getOrFetch(forKey: "missing")
        } catch CacheError.notFound {
            // The pattern matches whatever key the error carries.
        } catch {
            Issue.record("unexpected error \(error)")
        }
        cache["present"] = "here"
        #expect(try await cache.getOrFetch(forKey: "present") == "here")
    }

    @Test(arguments: [0, 1, 3])
    func retriesMaxRetryCountTimesThenFailsWithTheLastError(retries: Int) async throws {
        let setup = try FetchSetup(configure: { $0.maxRetryCount(retries) }) { _, call in
            throw FetchError(attempt: call)
        }
        let cache = setup.cache
        await #expect(throws: CacheError.fetchFailed) { try await cache.get("k") }
        do {
            _ = try await cache.getOrFetch(forKey: "k")
            Issue.record("expected a failure")
        } catch let error as CacheError {
            #expect(error.code == .fetchFailed)
            #expect(error.key == "k")
            #expect(error.attempts == retries + 1)
            // The second call's attempts follow the first call's.
            #expect(error.underlyingError as? FetchError == FetchError(attempt: 2 * (retries + 1)))
        }
        #expect(setup.calls.value == 2 * (retries + 1))
        #expect(cache["k"] == nil)
    }

    @Test func aRetryThatSucceedsIsStoredAfterTheBackoffWaits() async throws {
        let waits = Protected<[Duration]>([])
        let backoff = RetryBackoff.exponential(initial: .milliseconds(100), maximum: .seconds(1))
            .sleeping { duration in waits.withLock { $0.append(duration) } }
        let setup = try FetchSetup(configure: { $0.maxRetryCount(3).retryBackoff(backoff) }) { _, call in
            if call < 3 { throw FetchError(attempt: call) }
            return "third time"
        }
        let cache = setup.cache
        #expect(try await cache.getOrFetch(forKey: "k") == "third time")
        #expect(setup.calls.value == 3)
        #expect(waits.withLock { $0 } == [.milliseconds(100), .milliseconds(200)])
        #expect(cache["k"] == "third time")
    }

    @Test func backoffDelaysGrowAndStayWithinTheirBounds() {
        let exponential = RetryBackoff.exponential(initial: .milliseconds(100), multiplier: 3, maximum: .seconds(1))
        #expect(
            (1...4).map { exponential.delay(beforeRetry: $0) }
                == [.milliseconds(100), .milliseconds(300), .milliseconds(900), .seconds(1)]
        )
        for multiplier in [1, 1e30, .infinity] {
            let backoff = RetryBackoff.exponential(initial: .seconds(1), multiplier: multiplier, maximum: .seconds(10))
            for retry in [1, 2, 50, 10_000] {
                let delay = backoff.delay(beforeRetry: retry)
                #expect(delay >= .zero && delay <= .seconds(10))
            }
        }
        #expect(RetryBackoff.none.delay(beforeRetry: 3) == .zero)
    }

    @Test func maxRetryCountCanBeChangedAfterBuild() async throws {
        let setup = try FetchSetup { _, call in throw FetchError(attempt: call) }
        let cache = setup.cache
        cache.maxRetryCount = 2
        #expect(cache.maxRetryCount == 2)
        _ = try? await cache.getOrFetch(forKey: "k")
        #expect(setup.calls.value == 3)
    }

    @Test func theDelegateMaySupplyAFallbackThatIsNotStored() async throws {
        let folder = TemporaryDirectory()
        let delegate = RecordingDelegate<String>()
        delegate.setFallback("placeholder", forKey: "k")
        let cache = try folder.stringBuilder().delegate(delegate).maxRetryCount(1)
            .fetcher { _ in throw FetchError(attempt: 0) }.build()
        #expect(try await cache.getOrFetch(forKey: "k") == "placeholder")
        #expect(cache["k"] == nil)
        let reported = try #require(delegate.lastFetchError as? CacheError)
        #expect(reported.code == .fetchFailed)
        #expect(reported.attempts == 2)
        // No fallback for another key: the error reaches the caller.
        await #expect(throws: CacheError.self) { try await cache.getOrFetch(forKey: "other") }
    }

    @Test(arguments: [2, 16, 64])
    func concurrentCallersForOneKeyShareOneFetch(callers: Int) async throws {
        let setup = try FetchSetup(isGated: true) { key, _ in "shared \(key)" }
        let cache = setup.cache
        try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<callers {
                group.addTask { try await cache.getOrFetch(forKey: "k") }
            }
            #expect(await waitUntil { cache.flights.waiterCount(forKey: "k") == callers })
            setup.gate.open()
            for try await value in group { #expect(value == "shared k") }
        }
        #expect(setup.calls.value == 1)
        #expect(cache.flights.count == 0)
    }

    @Test func aFetchErrorReachesEveryWaiter() async throws {
        let setup = try FetchSetup(isGated: true) { _, _ in throw FetchError(attempt: 1) }
        let cache = setup.cache
        let failures = Counter()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    do {
                        _ = try await cache.getOrFetch(forKey: "k")
                    } catch let error as CacheError where error.code == .fetchFailed {
                        failures.increment()
                    } catch {}
                }
            }
            #expect(await waitUntil { cache.flights.waiterCount(forKey: "k") == 8 })
            setup.gate.open()
        }
        #expect(failures.value == 8)
        #expect(setup.calls.value == 1)
    }

    @Test func cancellingOneWaiterNeitherFailsTheOthersNorCancelsTheFetch() async throws {
        let sawCancellation = Counter()
        let setup = try FetchSetup(isGated: true) { _, _ in
            if Task.isCancelled { sawCancellation.increment() }
            return "value"
        }
        let cache = setup.cache
        let quitter = Task { try await cache.getOrFetch(forKey: "k") }
        let stayer = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { cache.flights.waiterCount(forKey: "k") == 2 })
        quitter.cancel()
        await #expect(throws: CancellationError.self) { try await quitter.value }
        #expect(cache.flights.waiterCount(forKey: "k") == 1)
        setup.gate.open()
        #expect(try await stayer.value == "value")
        #expect(setup.calls.value == 1)
        #expect(sawCancellation.value == 0)
        #expect(cache["k"] == "value")
    }

    /// Cancelling both waiters ends the fetch, and a fetcher that started sees the cancellation.
    ///
    /// The waiters may go before the fetch task reaches the fetcher or while the fetcher runs (a
    /// loaded run decides which). `RequestPoolingTests` covers the second order deterministically.
    @Test func cancellingEveryWaiterCancelsTheFetch() async throws {
        let folder = TemporaryDirectory()
        let calls = Counter()
        let fetcherSawCancellation = Counter()
        let cache = try folder.stringBuilder().fetcher { _ in
            calls.increment()
            do {
                try await Gate().wait()  // never opened: only cancellation ends it
            } catch {
                fetcherSawCancellation.increment()
                throw error
            }
            return "never"
        }.build()
        let first = Task { try await cache.getOrFetch(forKey: "k") }
        let second = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { cache.flights.waiterCount(forKey: "k") == 2 })
        first.cancel()
        second.cancel()
        await #expect(throws: CancellationError.self) { try await first.value }
        await #expect(throws: CancellationError.self) { try await second.value }
        #expect(cache.flights.count == 0)
        #expect(await waitUntil(seconds: 600) { cache.flights.runningCount == 0 })  // the fetch ended
        #expect(calls.value <= 1)
        #expect(fetcherSawCancellation.value == calls.value)
        #expect(cache["k"] == nil)
    }

    @Test func aFetchFailureCallbackMayFetchTheSameKeyAgain() async throws {
        let delegate = RecordingDelegate<String>()
        let setup = try FetchSetup(configure: { $0.delegate(delegate) }) { _, call in
            if call == 1 { throw FetchError(attempt: 1) }
            return "second try"
        }
        let cache = setup.cache
        let fromCallback = Protected<String?>(nil)
        delegate.onEvent = { cache, event in
            // The blocking form, from the callback: the failed fetch has left the table already.
            if case .fetchFailure(let key) = event {
                let value = try? blockingGet(cache, key)
                fromCallback.withLock { $0 = value }
            }
        }
        let result = await onPlainThread { try? blockingGet(cache, "k") }
        #expect(result == nil)  // the first fetch failed and the delegate gave no fallback
        #expect(fromCallback.withLock { $0 } == "second try")
        #expect(cache["k"] == "second try")
    }

    @Test(arguments: ["set", "remove", "removeAll"])
    func aFetchInFlightDoesNotUndoALaterChange(change: String) async throws {
        let setup = try FetchSetup(isGated: true) { _, _ in "fetched before the change" }
        let cache = setup.cache
        let fetch = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { setup.calls.value == 1 })
        switch change {
        case "set": cache["k"] = "new"
        case "remove": cache.removeValue(forKey: "k")
        default: cache.removeAll()
        }
        setup.gate.open()
        #expect(try await fetch.value == "fetched before the change")  // the caller still gets it
        await cache.flush()
        #expect(cache["k"] == (change == "set" ? "new" : nil))
        cache.clearMemory()
        #expect(cache["k"] == (change == "set" ? "new" : nil))
    }

    @Test(arguments: ["remove", "removeAll"])
    func aFetchBegunAfterAChangeDoesNotJoinAFetchFromBeforeIt(change: String) async throws {
        let setup = try FetchSetup(isGated: true) { _, call in
            call == 1 ? "fetched before the change" : "fetched after"
        }
        let cache = setup.cache
        let first = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil(seconds: 600) { setup.calls.value == 1 })
        if change == "remove" { cache.removeValue(forKey: "k") } else { cache.removeAll() }
        let second = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil(seconds: 600) { setup.calls.value == 2 || cache.flights.waiterCount(forKey: "k") == 2 })
        setup.gate.open()
        #expect(try await first.value == "fetched before the change")
        // Begun once the change had returned: a fetch of its own.
        let secondSaw = try await second.value
        #expect(secondSaw == "fetched after")
    }

    @Test(arguments: ["remove", "removeAll"])
    func aFetchBegunAfterAnotherCacheOnTheContainerChangedTheKeyDoesNotJoinAnOlderFetch(
        change: String
    )
        async throws
    {
        let setup = try FetchSetup(isGated: true) { _, call in
            call == 1 ? "fetched before the change" : "fetched after"
        }
        let cache = setup.cache
        // Another cache on the same container, in this process: its removals reach the first at once.
        let other = try setup.folder.stringBuilder().build()
        let first = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil(seconds: 600) { setup.calls.value == 1 })
        if change == "remove" { other.removeValue(forKey: "k") } else { other.removeAll() }
        let second = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil(seconds: 600) { setup.calls.value == 2 || cache.flights.waiterCount(forKey: "k") == 2 })
        setup.gate.open()
        #expect(try await first.value == "fetched before the change")
        let secondSaw = try await second.value
        #expect(secondSaw == "fetched after")
    }

    /// A memory-only cache's `set` takes a path of its own; a fetch begun after it returned, once
    /// memory evicted the value, must still fetch anew rather than join the fetch it replaced.
    @Test func aFetchBegunAfterASetOfAMemoryOnlyCacheDoesNotJoinAFetchFromBeforeIt() async throws {
        let setup = try FetchSetup(isGated: true, configure: { $0.maxDiskCount(0).maxRamCount(1) }) { _, call in
            call == 1 ? "fetched before the set" : "fetched after"
        }
        let cache = setup.cache
        let first = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil(seconds: 600) { setup.calls.value == 1 })
        cache.set("new", forKey: "k")
        // Memory holds one value: this evicts "k", and nothing else holds it.
        cache.set("other", forKey: "j")
        #expect(cache.memoryCount == 1)
        #expect(cache.entry(forKey: "k") == nil)
        let second = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil(seconds: 600) { setup.calls.value == 2 || cache.flights.waiterCount(forKey: "k") == 2 })
        setup.gate.open()
        #expect(try await first.value == "fetched before the set")
        // Begun once the set had returned: a fetch of its own, not the one the set replaced.
        let secondSaw = try await second.value
        #expect(secondSaw == "fetched after")
    }

    @Test(.timeLimit(.minutes(10)))
    func anEvictionCallbackMayFetchTheEvictedKey() async throws {
        let folder = TemporaryDirectory()
        let delegate = RecordingDelegate<String>()
        let cache = try folder.stringBuilder().maxRamCount(2).maxDiskCount(0).evictionPolicy(.lru)
            .delegate(delegate).fetcher { "fetched \($0)" }.build()
        let callbacks = Counter()
        delegate.onEvent = { cache, event in
            // Each refetch evicts another key: a chain the test cuts after 50 links.
            guard case .memoryEviction(let key) = event, callbacks.increment() < 50 else { return }
            _ = try? blockingGet(cache, key)
        }
        await onPlainThread {
            cache["a"] = "a"
            cache["b"] = "b"
            cache["c"] = "c"
        }
        #expect(callbacks.value >= 50)
        #expect(cache.memoryCount == 2)
        #expect(cache.flights.count == 0)
    }

    @Test func aCancelledCallerGetsCancellationErrorBeforeAnyFetch() async throws {
        let setup = try FetchSetup { _, _ in "v" }
        let cache = setup.cache
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await cache.getOrFetch(forKey: "k")
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(setup.calls.value == 0)
    }

    @Test func asyncGetDeliversTheResultOnce() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().fetcher { "fetched \($0)" }.build()
        let value = try await withCheckedThrowingContinuation { continuation in
            cache.asyncGet(forKey: "a") { continuation.resume(with: $0) }
        }
        #expect(value == "fetched a")
        let failing = try folder.stringBuilder("failing").build()
        await #expect(throws: CacheError.notFound) {
            try await withCheckedThrowingContinuation { continuation in
                failing.asyncGet(forKey: "a") { continuation.resume(with: $0) }
            }
        }
    }

    @Test func theBlockingFormWorksFromManyPlainThreadsAtOnce() async throws {
        let setup = try FetchSetup(isGated: true) { key, _ in "fetched \(key)" }
        let cache = setup.cache
        // Six blocked threads, more than the cores, two per key: the fetches must still run, once per key.
        async let results = withTaskGroup(of: String.self) { group in
            for index in 0..<6 {
                group.addTask { await onPlainThread { (try? blockingGet(cache, "key \(index % 3)")) ?? "failed" } }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(await waitUntil { (0..<3).allSatisfy { cache.flights.waiterCount(forKey: "key \($0)") == 2 } })
        setup.gate.open()
        #expect(await results.sorted() == (0..<6).map { "fetched key \($0 % 3)" }.sorted())
        #expect(setup.calls.value == 3)
        #expect(throws: CacheError.notFound) { try blockingGet(try setup.folder.stringBuilder("empty").build(), "x") }
    }

    @Test func theCompletionOfAsyncGetMayBlockOnTheCache() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().fetcher { key in
            await Task.yield()
            return "fetched \(key)"
        }.build()
        let values = try await withThrowingTaskGroup(of: String.self) { group in
            for index in 0..<8 {
                group.addTask {
                    try await withCheckedThrowingContinuation { continuation in
                        cache.asyncGet(forKey: "outer \(index)") { _ in
                            // A blocking call from inside the callback, which needs a fetch of its own.
                            continuation.resume(with: Result { try blockingGet(cache, "inner \(index)") })
                        }
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(values.sorted() == (0..<8).map { "fetched inner \($0)" }.sorted())
    }

    @Test func blockingCallsFromCooperativeThreadsDoNotDeadlock() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().fetcher { key in
            await Task.yield()
            return key
        }.build()
        // Block every cooperative thread (as many as there are cores) and more: the fetch runs elsewhere.
        try await withThrowingTaskGroup(of: String.self) { group in
            for index in 0..<4 {
                group.addTask { try blockingGet(cache, "key \(index)") }
            }
            var seen: [String] = []
            for try await value in group { seen.append(value) }
            #expect(seen.sorted() == (0..<4).map { "key \($0)" })
        }
    }
}
