import HoardTestSupport
import Testing

@testable import Hoard

/// Tests for `pooled()`: sharing, errors, cancellation and a concurrent stress.
@Suite struct PoolTests {
    @Test func concurrentGetsShareOneUnderlyingGet() async throws {
        let gate = Gate()
        let inner = RecordingLevel<String, Int>(["k": 7], gate: gate)
        let flights = SharedFlights<String, Int>()
        let level = inner.pooled(sharing: flights)
        let waiters = 8
        try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<waiters { group.addTask { try await level.get("k") } }
            #expect(await waitUntil { flights.waiterCount(forKey: "k") == waiters })
            gate.open()
            var results: [Int] = []
            for try await value in group { results.append(value) }
            #expect(results == Array(repeating: 7, count: waiters))
        }
        #expect(inner.gets == 1)
        #expect(flights.count == 0)
    }

    @Test func theErrorReachesEveryWaiter() async throws {
        let gate = Gate()
        let inner = RecordingLevel<String, Int>(getError: TestFailure("down"), gate: gate)
        let flights = SharedFlights<String, Int>()
        let level = inner.pooled(sharing: flights)
        let tasks = (0..<4).map { _ in Task { try await level.get("k") } }
        #expect(await waitUntil { flights.waiterCount(forKey: "k") == 4 })
        gate.open()
        for task in tasks {
            await #expect(throws: TestFailure("down")) { try await task.value }
        }
        #expect(inner.gets == 1)
    }

    @Test func poolingNeverCaches() async throws {
        let inner = RecordingLevel<String, Int>(["k": 1])
        let level = inner.pooled()
        #expect(try await level.get("k") == 1)
        try await inner.set(2, forKey: "k")
        #expect(try await level.get("k") == 2)
        #expect(inner.gets == 2)
        await #expect(throws: CacheError.notFound) { try await level.get("absent") }
    }

    @Test func cancellingOneWaiterKeepsTheSharedGet() async throws {
        let gate = Gate()
        let inner = RecordingLevel<String, Int>(["k": 3], gate: gate)
        let flights = SharedFlights<String, Int>()
        let level = inner.pooled(sharing: flights)
        let leaving = Task { try await level.get("k") }
        let staying = Task { try await level.get("k") }
        #expect(await waitUntil { flights.waiterCount(forKey: "k") == 2 && inner.gets == 1 })
        leaving.cancel()
        await #expect(throws: CancellationError.self) { try await leaving.value }
        #expect(flights.waiterCount(forKey: "k") == 1)
        gate.open()
        #expect(try await staying.value == 3)
        #expect(inner.cancelledGets == 0)
        #expect(inner.gets == 1)
    }

    @Test func cancellingEveryWaiterCancelsTheSharedGet() async throws {
        let gate = Gate()
        let inner = RecordingLevel<String, Int>(["k": 3], gate: gate)
        let flights = SharedFlights<String, Int>()
        let level = inner.pooled(sharing: flights)
        let tasks = (0..<3).map { _ in Task { try await level.get("k") } }
        #expect(await waitUntil { flights.waiterCount(forKey: "k") == 3 && inner.gets == 1 })
        for task in tasks { task.cancel() }
        for task in tasks {
            await #expect(throws: CancellationError.self) { try await task.value }
        }
        #expect(await waitUntil { inner.cancelledGets == 1 })
        #expect(flights.count == 0)
        // The next get starts afresh.
        gate.open()
        #expect(try await level.get("k") == 3)
    }

    @Test func concurrentStress() async throws {
        let keys = 16
        let callers = 400
        let started = Counter()
        let inner = BasicCache<Int, Int>(get: { key in
            started.increment()
            await Task.yield()
            if key % 5 == 0 { throw TestFailure("multiple of five") }
            return key * key
        })
        let level = inner.pooled()
        let outcomes = await withTaskGroup(of: (Int, Int?).self) { group in
            for caller in 0..<callers {
                let key = caller % keys
                group.addTask {
                    if caller % 7 == 0 { await Task.yield() }
                    return (key, try? await level.get(key))
                }
            }
            var outcomes: [(Int, Int?)] = []
            for await outcome in group { outcomes.append(outcome) }
            return outcomes
        }
        #expect(outcomes.count == callers)
        for (key, value) in outcomes {
            #expect(value == (key % 5 == 0 ? nil : key * key))
        }
        #expect(started.value >= keys)
        #expect(started.value <= callers)
    }
}
