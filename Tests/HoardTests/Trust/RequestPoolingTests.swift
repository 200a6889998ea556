import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Every way out of a pooled fetch, for every burst size from 2 to 64 callers.
///
/// Extends the single-size tests of `CacheFetchingTests`: exactly one fetch per burst (callers of
/// the async, callback and blocking forms mixed), a thrown error reaching every waiter, one
/// cancelled waiter (the one that started the fetch, or another) disturbing nobody, every waiter
/// cancelled cancelling the fetch, and a chaos round of cancellations racing the fetch's end. After
/// each burst every caller has returned and the table of fetches in flight is empty.
@Suite(.timeLimit(.minutes(10)))
struct RequestPoolingTests {
    init() { TestLog.install() }

    static let burstSizes = 2...64

    struct FetchFailure: Error, Equatable {
        let burst: Int
    }

    /// The three ways to call `getOrFetch`.
    enum Form: CaseIterable {
        case async, callback, blocking

        func get(_ cache: Cache<String>, _ key: String) async throws -> String {
            switch self {
            case .async:
                return try await cache.getOrFetch(forKey: key)
            case .callback:
                return try await withCheckedThrowingContinuation { continuation in
                    cache.asyncGet(forKey: key) { continuation.resume(with: $0) }
                }
            case .blocking:
                return try await onPlainThread { Result { try blockingGet(cache, key) } }.get()
            }
        }
    }

    @Test func eachBurstSharesExactlyOneFetchWhateverTheCallingForm() async throws {
        let folder = TemporaryDirectory()
        let calls = Protected<[String: Int]>([:])
        let gates = Protected<[String: Gate]>([:])
        let cache = try folder.stringBuilder().fetcher { key in
            let gate = calls.withLock { calls in
                calls[key, default: 0] += 1
                return gates.withLock { $0[key] }
            }
            try await gate?.wait()
            return "fetched \(key)"
        }.build()
        for size in Self.burstSizes {
            let key = "k\(size)"
            for burst in 1...2 {
                let gate = Gate()
                gates.withLock { $0[key] = gate }
                try await withThrowingTaskGroup(of: String.self) { group in
                    for caller in 0..<size {
                        let form = Form.allCases[caller % Form.allCases.count]
                        group.addTask { try await form.get(cache, key) }
                    }
                    #expect(await waitUntil { cache.flights.waiterCount(forKey: key) == size }, "burst of \(size)")
                    gate.open()
                    var values = 0
                    for try await value in group {
                        #expect(value == "fetched \(key)")
                        values += 1
                    }
                    #expect(values == size)
                }
                #expect(calls.withLock { $0[key] } == burst, "burst of \(size)")
                #expect(cache.flights.count == 0)
                cache.removeValue(forKey: key)  // the next burst misses again
            }
        }
    }

    @Test func aThrownErrorReachesEveryWaiterAndIsReportedOnce() async throws {
        let folder = TemporaryDirectory()
        let delegate = RecordingDelegate<String>()
        let calls = Counter()
        let gate = Protected(Gate())
        let cache = try folder.stringBuilder().delegate(delegate).fetcher { key in
            calls.increment()
            try await gate.withLock { $0 }.wait()
            throw FetchFailure(burst: Int(key.dropFirst()) ?? -1)
        }.build()
        for size in Self.burstSizes {
            let key = "k\(size)"
            let thisGate = Gate()
            gate.withLock { $0 = thisGate }
            let before = calls.value
            let errors = await withTaskGroup(of: (any Error)?.self) { group in
                for caller in 0..<size {
                    let form = Form.allCases[caller % Form.allCases.count]
                    group.addTask {
                        do {
                            _ = try await form.get(cache, key)
                            return nil
                        } catch {
                            return error
                        }
                    }
                }
                #expect(await waitUntil { cache.flights.waiterCount(forKey: key) == size })
                thisGate.open()
                return await group.reduce(into: []) { $0.append($1) }
            }
            #expect(errors.count == size)
            for error in errors {
                let failure = error as? CacheError
                #expect(failure?.code == .fetchFailed)
                #expect(failure?.key == key)
                #expect(failure?.underlyingError as? FetchFailure == FetchFailure(burst: size))
            }
            #expect(calls.value == before + 1, "burst of \(size)")
            #expect(delegate.events.filter { $0 == .fetchFailure(key) }.count == 1)
            #expect(cache.flights.count == 0)
            #expect(cache[key] == nil)
        }
    }

    @Test func oneCancelledWaiterNeitherFailsTheOthersNorStartsASecondFetch() async throws {
        let folder = TemporaryDirectory()
        let calls = Counter()
        let sawCancellation = Counter()
        let gate = Protected(Gate())
        let cache = try folder.stringBuilder().fetcher { key in
            calls.increment()
            try await gate.withLock { $0 }.wait()
            if Task.isCancelled { sawCancellation.increment() }
            return "fetched \(key)"
        }.build()
        var random = SplitMix64(seed: 8)
        for size in Self.burstSizes {
            let key = "k\(size)"
            let thisGate = Gate()
            gate.withLock { $0 = thisGate }
            let before = calls.value
            // The first caller starts the fetch alone, so that it can be the one cancelled.
            var tasks = [Task { try await cache.getOrFetch(forKey: key) }]
            #expect(await waitUntil { cache.flights.waiterCount(forKey: key) == 1 })
            for _ in 1..<size { tasks.append(Task { try await cache.getOrFetch(forKey: key) }) }
            #expect(await waitUntil { cache.flights.waiterCount(forKey: key) == size })
            let quitter = size.isMultiple(of: 2) ? 0 : Int.random(in: 1..<size, using: &random)
            tasks[quitter].cancel()
            await #expect(throws: CancellationError.self) { try await tasks[quitter].value }
            #expect(cache.flights.waiterCount(forKey: key) == size - 1)
            // A caller arriving after the cancellation joins the same fetch.
            let latecomer = Task { try await cache.getOrFetch(forKey: key) }
            #expect(await waitUntil { cache.flights.waiterCount(forKey: key) == size })
            thisGate.open()
            for (index, task) in tasks.enumerated() where index != quitter {
                #expect(try await task.value == "fetched \(key)")
            }
            #expect(try await latecomer.value == "fetched \(key)")
            #expect(calls.value == before + 1, "burst of \(size)")
            #expect(cache.flights.count == 0)
        }
        #expect(sawCancellation.value == 0)
    }

    /// The fetcher is running when the waiters go (waited for, so that the test is deterministic;
    /// waiters that go before it starts are covered by `CacheFetchingTests`).
    @Test func cancellingEveryWaiterCancelsTheFetchAndTheNextCallerFetchesAfresh() async throws {
        let folder = TemporaryDirectory()
        let calls = Protected<[String: Int]>([:])
        let blocking = Protected<Set<String>>([])
        let cancelled = Protected<[String: Gate]>([:])
        let cache = try folder.stringBuilder().fetcher { key in
            calls.withLock { $0[key, default: 0] += 1 }
            guard blocking.withLock({ $0.contains(key) }) else { return "fresh fetch of \(key)" }
            do {
                try await Gate().wait()  // never opened: only cancellation ends it
            } catch {
                cancelled.withLock { $0[key] }?.open()
                throw error
            }
            return "never"
        }.build()
        var random = SplitMix64(seed: 9)
        for size in Self.burstSizes {
            let key = "k\(size)"
            let fetchCancelled = Gate()
            cancelled.withLock { $0[key] = fetchCancelled }
            blocking.withLock { _ = $0.insert(key) }
            let tasks = (0..<size).map { _ in Task { try await cache.getOrFetch(forKey: key) } }
            #expect(await waitUntil { cache.flights.waiterCount(forKey: key) == size })
            #expect(await waitUntil { calls.withLock { $0[key] } == 1 })
            // Cancelled in a random order, from concurrent tasks.
            await withTaskGroup(of: Void.self) { group in
                for task in tasks.shuffled(using: &random) { group.addTask { task.cancel() } }
            }
            for task in tasks { await #expect(throws: CancellationError.self) { try await task.value } }
            #expect(cache.flights.count == 0)
            try await fetchCancelled.wait()  // the fetch saw the cancellation
            #expect(cache[key] == nil)
            blocking.withLock { _ = $0.remove(key) }
            #expect(try await cache.getOrFetch(forKey: key) == "fresh fetch of \(key)")
            #expect(calls.withLock { $0[key] } == 2)
        }
    }

    /// Cancellations race the end of the fetch: every caller returns, the ones not cancelled get the
    /// fetch's result, and nothing stays in the table.
    @Test func noWaiterIsLeftHangingWhenCancellationsRaceTheResult() async throws {
        let folder = TemporaryDirectory()
        let calls = Protected<[String: Int]>([:])
        let gate = Protected(Gate())
        let cache = try folder.stringBuilder().fetcher { key in
            calls.withLock { $0[key, default: 0] += 1 }
            try await gate.withLock { $0 }.wait()
            if key.hasSuffix("!") { throw FetchFailure(burst: 0) }
            return "fetched \(key)"
        }.build()
        var random = SplitMix64(seed: 10)
        for round in 0..<(40 * StressScale.rounds) {
            let size = Int.random(in: Self.burstSizes, using: &random)
            let fails = Bool.random(using: &random)
            let key = "round \(round)" + (fails ? "!" : "")
            let thisGate = Gate()
            gate.withLock { $0 = thisGate }
            let tasks = (0..<size).map { _ in Task { try await cache.getOrFetch(forKey: key) } }
            #expect(await waitUntil { cache.flights.waiterCount(forKey: key) == size })
            let cancelledCount = Int.random(in: 0...size, using: &random)
            let cancelled = Set(tasks.indices.shuffled(using: &random).prefix(cancelledCount))
            let openAt = Int.random(in: 0...cancelledCount, using: &random)
            await withTaskGroup(of: Void.self) { group in
                for (position, index) in cancelled.enumerated() {
                    if position == openAt { group.addTask { thisGate.open() } }
                    group.addTask { tasks[index].cancel() }
                }
                group.addTask { thisGate.open() }
            }
            for (index, task) in tasks.enumerated() {
                let result = await task.result
                switch result {
                case .success(let value):
                    #expect(!fails && value == "fetched \(key)")
                case .failure(let error as CacheError):
                    #expect(fails && error.code == .fetchFailed)
                case .failure(let error):
                    #expect(error is CancellationError && cancelled.contains(index), "round \(round): \(error)")
                }
            }
            // One fetch; none when every waiter went before it started (then it may still start late).
            let fetches = calls.withLock { $0[key] ?? 0 }
            #expect(fetches == 1 || (fetches == 0 && cancelledCount == size), "round \(round)")
            #expect(cache.flights.count == 0, "round \(round)")
        }
    }
}
