import HoardTestSupport
import Testing

@testable import Hoard

/// Tests for `conditioned`, `fallback(with:)`, `defaulting(to:)`, `singleKey(_:)`, `readOnly()` and
/// `switchLevels`.
@Suite struct AdapterTests {
    @Test func conditionedSkipsTheLevel() async throws {
        let inner = RecordingLevel<String, Int>(["big": 1, "small": 2])
        let level = inner.conditioned { key in key != "big" }
        #expect(try await level.get("small") == 2)
        await #expect(throws: CacheError.notFound) { try await level.get("big") }
        try await level.set(3, forKey: "big")
        try await level.removeValue(forKey: "big")
        #expect(inner.values["big"] == 1)
        try await level.set(4, forKey: "small")
        #expect(inner.values["small"] == 4)
        await level.clear()
        #expect(inner.clears == 1)
    }

    @Test func fallbackRecoversAFailedGet() async throws {
        let inner = RecordingLevel<String, Int>(getError: TestFailure("down"))
        let seen = Protected<(any Error)?>(nil)
        let level = inner.fallback { error in
            seen.withLock { $0 = error }
            return -1
        }
        #expect(try await level.get("k") == -1)
        #expect(seen.withLock { $0 } is TestFailure)
        #expect(inner.values.isEmpty)
        let rethrowing = inner.fallback { _ in throw TestFailure("still down") }
        await #expect(throws: TestFailure("still down")) { try await rethrowing.get("k") }
    }

    @Test func defaultingReturnsTheDefaultWithoutStoringIt() async throws {
        let inner = RecordingLevel<String, Int>(["k": 1])
        let level = inner.defaulting(to: 0)
        #expect(try await level.get("k") == 1)
        #expect(try await level.get("absent") == 0)
        #expect(inner.values == ["k": 1])
    }

    @Test func fallbackDoesNotRecoverCancellation() async throws {
        let gate = Gate()
        let inner = RecordingLevel<String, Int>(gate: gate)
        let level = inner.defaulting(to: 0)
        let task = Task { try await level.get("k") }
        #expect(await waitUntil { inner.gets == 1 })
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
    }

    @Test func singleKeyUsesOneKey() async throws {
        let inner = RecordingLevel<String, Int>()
        let level = inner.singleKey("settings")
        try await level.set(9, forKey: ())
        #expect(inner.values == ["settings": 9])
        #expect(try await level.get(()) == 9)
        try await level.removeValue(forKey: ())
        await #expect(throws: CacheError.notFound) { try await level.get(()) }
    }

    @Test func readOnlyIgnoresWrites() async throws {
        let inner = RecordingLevel<String, Int>(["k": 1])
        let level = inner.readOnly()
        try await level.set(2, forKey: "k")
        try await level.removeValue(forKey: "k")
        await level.clear()
        #expect(inner.values == ["k": 1])
        #expect(inner.sets == 0 && inner.removes == 0 && inner.clears == 0)
        #expect(try await level.get("k") == 1)
        level.onMemoryWarning()
        #expect(inner.memoryWarnings == 1)
        // A read-only level behind a writable one does not fail the composition's writes.
        let memory = MemoryCacheLevel<String, Int>(capacity: 2)
        try await memory.compose(level).set(5, forKey: "n")
        #expect(try await memory.get("n") == 5)
    }

    @Test func switchLevelsRoutesEachKey() async throws {
        let small = RecordingLevel<Int, String>()
        let large = RecordingLevel<Int, String>()
        let level = switchLevels(small, large) { key in key < 100 ? .cacheA : .cacheB }
        try await level.set("s", forKey: 1)
        try await level.set("l", forKey: 1_000)
        #expect(small.values == [1: "s"])
        #expect(large.values == [1_000: "l"])
        #expect(try await level.get(1_000) == "l")
        #expect(small.gets == 0)
        try await level.removeValue(forKey: 1)
        #expect(small.values.isEmpty)
        await level.clear()
        level.onMemoryWarning()
        #expect(small.clears == 1 && large.clears == 1)
        #expect(small.memoryWarnings == 1 && large.memoryWarnings == 1)
    }
}
