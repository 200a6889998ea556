import HoardTestSupport
import Testing

@testable import Hoard

/// Tests for `batchGetSome(_:)` and `allBatch()`.
@Suite struct BatchTests {
    /// A level whose gets finish in the reverse order of their keys, each after the next key's.
    static func reverseOrderLevel(count: Int) -> BasicCache<Int, Int> {
        let finished = Protected(Set<Int>())
        return BasicCache { key in
            _ = await waitUntil { key == count - 1 || finished.withLock { $0.contains(key + 1) } }
            finished.withLock { _ = $0.insert(key) }
            return key * 10
        }
    }

    @Test func batchGetSomeKeepsKeyOrderAndSkipsMisses() async throws {
        let level = RecordingLevel<Int, String>([1: "one", 3: "three", 4: "four"])
        #expect(try await level.batchGetSome([4, 2, 1, 3, 9]) == ["four", "one", "three"])
        #expect(try await level.batchGetSome([]).isEmpty)
    }

    @Test func batchGetSomeNeverFailsForErrors() async throws {
        let level = RecordingLevel<Int, String>(getError: TestFailure())
        #expect(try await level.batchGetSome([1, 2]).isEmpty)
    }

    @Test func resultsAreInKeyOrderNotCompletionOrder() async throws {
        let level = Self.reverseOrderLevel(count: 5)
        #expect(try await level.batchGetSome([0, 1, 2, 3, 4]) == [0, 10, 20, 30, 40])
        #expect(try await level.allBatch().get([0, 1, 2, 3, 4]) == [0, 10, 20, 30, 40])
    }

    @Test func allBatchGetsSetsAndRemoves() async throws {
        let inner = RecordingLevel<String, Int>()
        let batch = inner.allBatch()
        try await batch.set([1, 2, 3], forKey: ["a", "b", "c"])
        #expect(inner.values == ["a": 1, "b": 2, "c": 3])
        #expect(try await batch.get(["c", "a"]) == [3, 1])
        try await batch.removeValue(forKey: ["a", "b"])
        #expect(inner.values == ["c": 3])
        await #expect(throws: CacheError.invalidConfiguration) { try await batch.set([1], forKey: ["a", "b"]) }
        await batch.clear()
        #expect(inner.values.isEmpty)
    }

    /// A key given twice to one batch set, as itself or in another spelling that `==` calls the same
    /// string: the later value is the one kept, as a loop of sets would leave it.
    @Test(arguments: [["k", "k"], ["\u{E9}", "e\u{301}"]])
    func aBatchSetOfOneKeyTwiceKeepsTheLaterValue(keys: [String]) async throws {
        let stored = Protected([String: String]())
        let level = BasicCache<String, String>(
            get: { key in
                guard let value = stored.withLock({ $0[key] }) else { throw CacheError.notFound }
                return value
            },
            set: { value, key in
                // The earlier value's set is the slower one: had both been made at once, it would
                // land last.
                if value == "first" { _ = await waitUntil { stored.withLock { $0[key] != nil } } }
                stored.withLock { $0[key] = value }
            }
        )
        try await level.allBatch().set(["first", "second"], forKey: keys)
        #expect(try await level.get(keys[0]) == "second")
        #expect(stored.withLock { $0.count } == 1)
    }

    /// A key that is not `Hashable`, so that a batch cannot tell its repeats.
    struct Slot: Sendable {
        let name: String
    }

    @Test func aBatchSetOfKeysThatAreNotHashableSetsThemInOrder() async throws {
        let made = Protected([(key: String, value: Int)]())
        let level = BasicCache<Slot, Int>(
            get: { _ in throw CacheError.notFound },
            set: { value, key in
                await Task.yield()
                made.withLock { $0.append((key.name, value)) }
            }
        )
        try await level.allBatch().set([1, 2, 3], forKey: [Slot(name: "a"), Slot(name: "b"), Slot(name: "a")])
        #expect(made.withLock { $0.map(\.key) } == ["a", "b", "a"])
        #expect(made.withLock { $0.map(\.value) } == [1, 2, 3])
    }

    @Test func allBatchFailsOnTheFirstFailureAndCancelsTheRest() async throws {
        let gate = Gate()
        let slow = RecordingLevel<String, Int>(gate: gate)
        let level = BasicCache<String, Int>(get: { key in
            if key == "missing" {
                // Fail only once the slow get is running, so that there is something to cancel.
                _ = await waitUntil { slow.gets == 1 }
                throw CacheError.notFound
            }
            return try await slow.get(key)
        })
        await #expect(throws: CacheError.notFound) { try await level.allBatch().get(["slow", "missing"]) }
        #expect(slow.cancelledGets == 1)
    }

    @Test func cancellingABatchCancelsItsGets() async throws {
        let gate = Gate()
        let slow = RecordingLevel<Int, Int>(gate: gate)
        let task = Task { try await slow.batchGetSome([1, 2, 3]) }
        #expect(await waitUntil { slow.gets == 3 })
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(slow.cancelledGets == 3)
    }
}
