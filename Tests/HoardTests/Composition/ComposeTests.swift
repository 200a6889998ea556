import HoardTestSupport
import Testing

@testable import Hoard

/// Tests for `compose`, `backed(by:)` and `pushing(to:)`.
@Suite struct ComposeTests {
    @Test func getPrefersTheFirstLevel() async throws {
        let first = RecordingLevel<String, Int>(["k": 1])
        let second = RecordingLevel<String, Int>(["k": 2])
        #expect(try await first.compose(second).get("k") == 1)
        #expect(second.gets == 0)
    }

    @Test func missInTheFirstLevelIsFilledFromTheSecond() async throws {
        let first = MemoryCacheLevel<String, Int>(capacity: 4)
        let second = RecordingLevel<String, Int>(["k": 2])
        let levels = first.compose(second)
        #expect(try await levels.get("k") == 2)
        #expect(try await first.get("k") == 2)
        #expect(try await levels.get("k") == 2)
        #expect(second.gets == 1)
    }

    @Test func failedBackFillDoesNotFailTheGet() async throws {
        let first = RecordingLevel<String, Int>(writeError: TestFailure("full"))
        let second = RecordingLevel<String, Int>(["k": 2])
        #expect(try await first.compose(second).get("k") == 2)
        #expect(first.sets == 1)
    }

    @Test func missInBothLevelsThrowsTheSecondLevelsError() async {
        let first = RecordingLevel<String, Int>(getError: TestFailure("first"))
        let second = RecordingLevel<String, Int>()
        await #expect(throws: CacheError.notFound) { try await first.compose(second).get("k") }
    }

    @Test func writesReachBothLevels() async throws {
        let first = RecordingLevel<String, Int>()
        let second = RecordingLevel<String, Int>()
        let levels = first.compose(second)
        try await levels.set(1, forKey: "a")
        #expect(first.values == ["a": 1])
        #expect(second.values == ["a": 1])
        try await levels.removeValue(forKey: "a")
        #expect(first.values.isEmpty && second.values.isEmpty)
        await levels.clear()
        levels.onMemoryWarning()
        #expect(first.clears == 1 && second.clears == 1)
        #expect(first.memoryWarnings == 1 && second.memoryWarnings == 1)
    }

    @Test func failedSetInOneLevelStillSetsTheOther() async throws {
        let first = RecordingLevel<String, Int>(writeError: TestFailure("first"))
        let second = RecordingLevel<String, Int>()
        await #expect(throws: TestFailure("first")) { try await first.compose(second).set(1, forKey: "a") }
        #expect(second.values == ["a": 1])
    }

    @Test func memoryWarningReachesEveryLevelOfAChain() async throws {
        let levels = (0..<3).map { _ in RecordingLevel<String, Int>() }
        let chain = levels[0].compose(levels[1]).compose(levels[2]).pooled().transformKeys { (key: Int) in "\(key)" }
        chain.onMemoryWarning()
        #expect(levels.allSatisfy { $0.memoryWarnings == 1 })
    }

    @Test func cancelledGetDoesNotFallThrough() async throws {
        let gate = Gate()
        let first = RecordingLevel<String, Int>(gate: gate)
        let second = RecordingLevel<String, Int>(["k": 2])
        let task = Task { try await first.compose(second).get("k") }
        #expect(await waitUntil { first.gets == 1 })
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(second.gets == 0)
    }

    @Test func backedByReadsThroughAndWritesOnlyToItself() async throws {
        let front = RecordingLevel<String, Int>()
        let back = RecordingLevel<String, Int>(["k": 2])
        let levels = front.backed(by: back)
        #expect(try await levels.get("k") == 2)
        #expect(front.values == ["k": 2])
        try await levels.set(3, forKey: "n")
        try await levels.removeValue(forKey: "k")
        await levels.clear()
        #expect(back.values == ["k": 2])
        #expect(back.sets == 0 && back.removes == 0 && back.clears == 0)
    }

    @Test func pushingWritesToBothAndReadsOnlyItself() async throws {
        let front = RecordingLevel<String, Int>()
        let back = RecordingLevel<String, Int>(["k": 2])
        let levels = front.pushing(to: back)
        await #expect(throws: CacheError.notFound) { try await levels.get("k") }
        #expect(back.gets == 0)
        try await levels.set(3, forKey: "n")
        #expect(front.values == ["n": 3])
        #expect(back.values == ["k": 2, "n": 3])
        try await levels.removeValue(forKey: "n")
        #expect(back.values == ["k": 2])
        await levels.clear()
        #expect(back.clears == 1)
    }

    @Test func memoryOverDiskOverFetcher() async throws {
        let directory = TemporaryDirectory()
        let memory = MemoryCacheLevel<String, String>(capacity: 2)
        let disk = DiskCacheLevel<String, String>(
            directory: directory.container(),
            capacity: 10,
            serializer: StringSerializer()
        )
        let fetches = Counter()
        let network = BasicCache<String, String>(get: { key in
            fetches.increment()
            return "fetched \(key)"
        })
        let levels = memory.compose(disk).compose(network)
        #expect(try await levels.get("a") == "fetched a")
        #expect(try await disk.get("a") == "fetched a")
        memory.onMemoryWarning()
        #expect(try await levels.get("a") == "fetched a")
        #expect(fetches.value == 1)
    }
}

extension ComposeTests {
    @Test func aMemoryFirstLevelServesHitsSynchronouslyAndMissesFromTheNextLevel() async throws {
        let memory = MemoryCacheLevel<String, Int>(capacity: 2, policy: .lru)
        let backing = RecordingLevel<String, Int>(["a": 1, "b": 2, "c": 3])
        let composed = memory.compose(backing)
        #expect(composed.cachedValue(forKey: "a") == nil)  // not in memory yet: ask get
        #expect(try await composed.get("a") == 1)  // from the next level, filled into memory
        #expect(composed.cachedValue(forKey: "a") == 1)
        #expect(try await composed.get("a") == 1)
        #expect(backing.gets == 1)
        // A synchronous hit is an access: "a" was used after "b", so "b" is evicted first.
        #expect(try await composed.get("b") == 2)
        _ = composed.cachedValue(forKey: "a")
        #expect(try await composed.get("c") == 3)
        #expect(memory.cachedValue(forKey: "b") == nil)
        #expect(memory.cachedValue(forKey: "a") == 1)
    }

    @Test func theSynchronousPathSurvivesLongerCompositionsAndNotOtherLevels() async throws {
        let memory = MemoryCacheLevel<String, Int>(capacity: 10)
        let middle = RecordingLevel<String, Int>()
        let last = RecordingLevel<String, Int>(["k": 7])
        let chain = memory.compose(middle).compose(last)
        #expect(try await chain.get("k") == 7)
        #expect(chain.cachedValue(forKey: "k") == 7)  // memory was filled, and answers at once
        let asyncFirst = middle.compose(memory)
        #expect(asyncFirst.cachedValue(forKey: "k") == nil)  // a first level without the fast path
        #expect(try await asyncFirst.get("k") == 7)  // the miss in `middle` falls through to memory
    }
}
