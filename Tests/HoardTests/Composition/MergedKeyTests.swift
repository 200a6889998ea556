import HoardTestSupport
import Testing

@testable import Hoard

/// Key mappings that send two keys to one (`transformKeys { $0.lowercased() }`): the two are one key
/// for the batches and the pooling built over them, as they are for the level below.
@Suite struct MergedKeyTests {
    /// A level of strings whose set of the value `"first"` waits, `seconds` at most, for the key.
    ///
    /// It waits until the key holds a value: had `"first"` and a later value been set at once,
    /// `"first"` would land last. Set one after another, `"first"` waits out the bound and lands first.
    static func slowFirstLevel(
        _ stored: Protected<[String: String]>,
        waitingAtMost seconds: Int = 120
    ) -> BasicCache<String, String> {
        BasicCache(
            get: { key in
                guard let value = stored.withLock({ $0[key] }) else { throw CacheError.notFound }
                return value
            },
            set: { value, key in
                if value == "first" { _ = await waitUntil(seconds: seconds) { stored.withLock { $0[key] != nil } } }
                stored.withLock { $0[key] = value }
            }
        )
    }

    /// Two keys that map to one, in one batch set: the later value is the one kept, as a loop of sets
    /// would leave it.
    @Test func aBatchSetOfTwoKeysThatMapToOneKeepsTheLaterValue() async throws {
        let stored = Protected([String: String]())
        let level = Self.slowFirstLevel(stored).transformKeys { (key: String) in key.lowercased() }
        try await level.allBatch().set(["first", "second"], forKey: ["Foo", "foo"])
        #expect(stored.withLock { $0 } == ["foo": "second"])
        #expect(try await level.get("FOO") == "second")
    }

    /// The same through two mappings and a value transformation: each keeps the keys one.
    @Test func keysMergedTwoLevelsDownAreOneKeyForABatchSet() async throws {
        let stored = Protected([String: String]())
        let level = Self.slowFirstLevel(stored)
            .transformKeys { (key: String) in key.lowercased() }
            .transformKeys { (number: Int) in number.isMultiple(of: 2) ? "EVEN" : "Odd" }
            .transformValues(TwoWayTransformer<String, String>(transform: { $0 }, inverseTransform: { $0 }))
        try await level.allBatch().set(["first", "other", "second"], forKey: [2, 3, 4])
        #expect(stored.withLock { $0 } == ["even": "second", "odd": "other"])
    }

    /// Keys the mapping keeps apart are all set, and a key it cannot map fails the batch as its set
    /// would, without holding back the others.
    @Test func aBatchSetWithAKeyThatDoesNotMapSetsTheOthersAndThrows() async throws {
        let inner = RecordingLevel<String, Int>()
        let level = inner.transformKeys { (key: String) -> String in
            guard !key.isEmpty else { throw TestFailure("empty key") }
            return key.lowercased()
        }
        await #expect(throws: TestFailure("empty key")) {
            try await level.allBatch().set([1, 2, 3, 4], forKey: ["A", "", "b", "a"])
        }
        #expect(inner.values == ["a": 4, "b": 3])
    }

    /// Concurrent gets of two keys that map to one share one get, as gets of one key do.
    @Test func getsOfTwoKeysThatMapToOneShareOneGet() async throws {
        let gate = Gate()
        let inner = RecordingLevel<String, Int>(["foo": 7], gate: gate)
        let flights = SharedFlights<StoredKey, Int>()
        let level = inner.transformKeys { (key: String) in key.lowercased() }.pooled(sharingByStoredKey: flights)
        let foo = try #require(StoredKey("foo"))
        let first = Task { try await level.get("Foo") }
        let second = Task { try await level.get("fOO") }
        #expect(await waitUntil { flights.waiterCount(forKey: foo) == 2 })
        gate.open()
        #expect(try await first.value == 7)
        #expect(try await second.value == 7)
        #expect(inner.gets == 1)
    }

    /// A get that starts once a set of a key that maps to its own has returned does not join a get
    /// from before that set.
    @Test func aGetAfterASetOfAKeyThatMapsToItsOwnDoesNotJoinAnOlderGet() async throws {
        let gate = Gate()
        let stored = Protected(["foo": "old"])
        let reads = Counter()
        let inner = BasicCache<String, String>(
            get: { key in
                // Read first, then wait: an older get answers with what it read before the set.
                let value = stored.withLock { $0[key] }
                reads.increment()
                try await gate.wait()
                guard let value else { throw CacheError.notFound }
                return value
            },
            set: { value, key in stored.withLock { $0[key] = value } }
        )
        let level = inner.transformKeys { (key: String) in key.lowercased() }.pooled()
        let older = Task { try await level.get("Foo") }
        #expect(await waitUntil { reads.value == 1 })
        try await level.set("new", forKey: "foo")
        let newer = Task { try await level.get("Foo") }
        // The newer get either reads for itself or joins the older one; neither ends before the gate
        // opens. The guard is short: a newer get that reads for itself reads "new" whenever it does,
        // and one that joins the older get never reads, so this wait only gives it time to join.
        _ = await waitUntil(seconds: 10) { reads.value == 2 }
        gate.open()
        #expect(try await newer.value == "new")
        _ = try await older.value
    }

    /// Batch sets of one key in three spellings, with pooled gets of a fourth running all along: after
    /// each batch, the key holds the batch's last value, and a get that starts then returns it.
    @Test func mappedKeysUnderBatchesAndPooledGetsStress() async throws {
        let stored = Protected([String: Int]())
        let inner = BasicCache<String, Int>(
            get: { key in
                let value = stored.withLock { $0[key] }
                await Task.yield()
                guard let value else { throw CacheError.notFound }
                return value
            },
            set: { value, key in
                await Task.yield()
                stored.withLock { $0[key] = value }
            }
        )
        let level = inner.transformKeys { (key: String) in key.lowercased() }.pooled()
        let batch = level.allBatch()
        let isDone = Protected(false)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<2 {
                group.addTask {
                    while !isDone.withLock({ $0 }) {
                        _ = try? await level.get("kEY")
                        await Task.yield()
                    }
                }
            }
            for round in 0..<(200 * StressScale.rounds) {
                let values = [3 * round, 3 * round + 1, 3 * round + 2]
                try await batch.set(values, forKey: ["Key", "KEY", "key"])
                #expect(stored.withLock { $0["key"] } == values[2])
                #expect(try await level.get("kEy") == values[2])
            }
            isDone.withLock { $0 = true }
            try await group.waitForAll()
        }
    }
}
