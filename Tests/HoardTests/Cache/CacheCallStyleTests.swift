import Dispatch
import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Memory hits through `await getOrFetch` and `asyncGet`: no executor hop, no task per call, and a
/// completion that can wait for another.
@Suite(.validatesCacheInvariants) struct CacheCallStyleTests {
    /// An executor that counts the jobs it is given.
    final class CountingExecutor: SerialExecutor {
        let jobs = Counter()
        private let queue = DispatchQueue(label: "CountingExecutor")

        func enqueue(_ job: consuming ExecutorJob) {
            _ = jobs.increment()
            let job = UnownedJob(job)
            queue.async { job.runSynchronously(on: self.asUnownedSerialExecutor()) }
        }

        func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }
    }

    /// An actor on a counting executor.
    actor Reader {
        let executor = CountingExecutor()
        nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

        func read(_ cache: Cache<String>, times: Int) async throws -> Int {
            var found = 0
            for _ in 0..<times where try await cache.getOrFetch(forKey: "k") == "v" { found += 1 }
            return found
        }
    }

    @Test func aMemoryHitThroughAwaitGetOrFetchNeverLeavesTheCallersExecutor() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().maxDiskCount(0).fetcher { _ in "fetched" }.build()
        cache["k"] = "v"
        let reader = Reader()
        #expect(try await reader.read(cache, times: 1_000) == 1_000)
        // Entering the actor is one job; a hop per call would add a thousand.
        #expect(reader.executor.jobs.value <= 2)
    }

    @Test func aMissStillFetchesAndComesBackToTheCaller() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().fetcher { "fetched \($0)" }.build()
        let value = try await Reader().read(cache, times: 3)
        #expect(value == 0)  // "fetched k", never "v"
        #expect(cache["k"] == "fetched k")
        #expect(cache.statistics.fetches == 1)
    }

    @Test func aHitsCompletionRunsOffTheCallersThread() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().build()
        cache["k"] = "v"
        let (sameThread, value) = await onPlainThread { () -> (Bool, String?) in
            let caller = pthread_self()
            let done = DispatchSemaphore(value: 0)
            let seen = Protected<(Bool, String?)>((true, nil))
            cache.asyncGet(forKey: "k") { result in
                seen.withLock { $0 = (pthread_equal(pthread_self(), caller) != 0, try? result.get()) }
                done.signal()
            }
            done.wait()
            return seen.withLock { $0 }
        }
        #expect(!sameThread)
        #expect(value == "v")
    }

    @Test func aHitsCompletionCanAskAgainAndWaitForTheAnswer() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().build()
        cache["a"] = "1"
        cache["b"] = "2"
        let done = DispatchSemaphore(value: 0)
        cache.asyncGet(forKey: "a") { _ in
            let inner = DispatchSemaphore(value: 0)
            cache.asyncGet(forKey: "b") { _ in inner.signal() }
            inner.wait()  // would wait for itself on one shared queue
            done.signal()
        }
        #expect(await signalled(done, within: 600))
    }

    @Test func hitsAwaitedOneAfterAnotherByManyCallersEachArriveOnTheSharedQueue() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().maxDiskCount(0).build()
        for index in 0..<100 { cache["k\(index)"] = "v\(index)" }
        let byID = cache.keyed { (id: Int) in "k\(id)" }
        let correct = try await withThrowingTaskGroup(of: Int.self) { group in
            for caller in 0..<8 {
                group.addTask {
                    var correct = 0
                    for round in 0..<500 {
                        let index = (caller * 7 + round) % 100
                        let (value, onQueue) = try await withCheckedThrowingContinuation { continuation in
                            let onComplete: @Sendable (Result<String, any Error>) -> Void = { result in
                                continuation.resume(with: result.map { ($0, CallbackQueue.isCurrent) })
                            }
                            if round.isMultiple(of: 2) {
                                cache.asyncGet(forKey: "k\(index)", onComplete: onComplete)
                            } else {
                                byID.asyncGet(forKey: index, onComplete: onComplete)
                            }
                        }
                        if value == "v\(index)" && onQueue { correct += 1 }
                    }
                    return correct
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(correct == 8 * 500)
    }

    @Test func aMissIsDeliveredOffTheSharedQueueWithItsError() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().build()
        cache["hit"] = "v"
        let (outcome, onQueue) = await withCheckedContinuation { continuation in
            cache.asyncGet(forKey: "missing") { result in
                continuation.resume(returning: (result, CallbackQueue.isCurrent))
            }
        }
        #expect(throws: CacheError.notFound) { try outcome.get() }
        #expect(!onQueue)
        // A hit right after still arrives, on the shared queue.
        let hit = await withCheckedContinuation { continuation in
            cache.asyncGet(forKey: "hit") { continuation.resume(returning: ((try? $0.get()), CallbackQueue.isCurrent)) }
        }
        #expect(hit == ("v", true))
    }

    @Test func everyCompletionOfABurstOfHitsRunsOnce() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().maxDiskCount(0).build()
        for index in 0..<100 { cache["k\(index)"] = "v\(index)" }
        let calls = Counter()
        let group = DispatchGroup()
        for round in 0..<10_000 {
            group.enter()
            cache.asyncGet(forKey: "k\(round % 100)") { result in
                if (try? result.get()) == "v\(round % 100)" { _ = calls.increment() }
                group.leave()
            }
        }
        #expect(await onPlainThread { group.wait(timeout: .now() + 120) == .success })
        #expect(calls.value == 10_000)
    }
}

/// After any `getOrFetch`, hit, fetched or failed, the caller is back on its own executor.
@Suite(.validatesCacheInvariants) struct CacheCallerExecutorTests {
    @MainActor
    @Test func aMainActorCallerStaysOnTheMainActorWhateverTheOutcome() async throws {
        let folder = TemporaryDirectory()
        struct Offline: Error {}
        let cache = try folder.stringBuilder().fetcher { key in
            if key.hasPrefix("fail") { throw Offline() }
            return "fetched \(key)"
        }.build()
        cache["hit"] = "v"
        _ = try await cache.getOrFetch(forKey: "hit")
        MainActor.preconditionIsolated("after a hit")
        _ = try await cache.getOrFetch(forKey: "fetched")
        MainActor.preconditionIsolated("after a fetch")
        _ = try? await cache.getOrFetch(forKey: "fail")
        MainActor.preconditionIsolated("after a failed fetch")
        _ = try? await cache.get("fail-again")
        MainActor.preconditionIsolated("after a failed get")
        let byID = cache.keyed { (id: Int) in "fail-\(id)" }
        _ = try? await byID.getOrFetch(forKey: 1)
        MainActor.preconditionIsolated("after a failed keyed fetch")
        let noFetcher = try folder.stringBuilder("other").build()
        _ = try? await noFetcher.getOrFetch(forKey: "missing")
        MainActor.preconditionIsolated("after a miss with no fetcher")
        #expect(cache["fetched"] == "fetched fetched")
    }
}
