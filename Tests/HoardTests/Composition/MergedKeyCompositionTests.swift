import HoardTestSupport
import Testing

@testable import Hoard

/// Key mappings inside a composition (`compose`, `backed(by:)`, `pushing(to:)`, `fallback`,
/// `switchLevels`): keys that one of the levels makes one are one for the batches and the pooling
/// built over the composite too.
@Suite struct MergedKeyCompositionTests {
    /// ``MergedKeyTests/slowFirstLevel(_:waitingAtMost:)`` with a bound short enough to wait out.
    static func slowFirstLevel(_ stored: Protected<[String: String]>) -> BasicCache<String, String> {
        MergedKeyTests.slowFirstLevel(stored, waitingAtMost: 5)
    }

    static func lowercased(_ level: BasicCache<String, String>) -> BasicCache<String, String> {
        level.transformKeys { (key: String) in key.lowercased() }
    }

    @Test(arguments: ["compose", "backed", "pushing", "composeUnder", "fallback", "switch", "twoMappings"])
    func aBatchSetOverACompositeOfAMappingKeepsTheLaterValue(_ shape: String) async throws {
        let stored = Protected([String: String]())
        let mapped = Self.lowercased(Self.slowFirstLevel(stored))
        let plain = RecordingLevel<String, String>()
        let level: BasicCache<String, String> =
            switch shape {
            case "compose": plain.compose(mapped)
            case "backed": mapped.backed(by: plain)
            case "pushing": plain.pushing(to: mapped)
            case "composeUnder": mapped.compose(plain)
            case "fallback": mapped.fallback { _ in "fallback" }
            case "switch": switchLevels(plain, mapped) { _ in .cacheB }
            default: Self.lowercased(BasicCache(get: { _ in throw CacheError.notFound })).compose(mapped)
            }
        try await level.allBatch().set(["first", "second"], forKey: ["Foo", "foo"])
        #expect(stored.withLock { $0 } == ["foo": "second"])
    }

    /// A pooled get that starts once a set of a key that one level maps to its own has returned does
    /// not join a get from before that set.
    @Test(arguments: ["compose", "twoMappings"])
    func aPooledGetAfterASetThroughACompositeDoesNotJoinAnOlderGet(_ shape: String) async throws {
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
        let mapped = Self.lowercased(inner)
        let first: BasicCache<String, String> =
            shape == "compose"
            ? RecordingLevel<String, String>().normalize()
            : Self.lowercased(RecordingLevel<String, String>().normalize())
        let level = first.compose(mapped).pooled()
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

    /// Two keys that are one in a level and apart in another are set one after another, in order,
    /// and both reach the level that keeps them apart.
    @Test func keysOneInOnlyOneLevelAreBothSetInOrder() async throws {
        let stored = Protected([String: String]())
        let plain = RecordingLevel<String, String>()
        let level = switchLevels(plain, Self.lowercased(Self.slowFirstLevel(stored))) { key in
            key.hasPrefix("F") ? .cacheA : .cacheB
        }
        try await level.allBatch().set(["first", "second", "third"], forKey: ["Foo", "foo", "Foo"])
        #expect(plain.values == ["Foo": "third"])
        #expect(stored.withLock { $0 } == ["foo": "second"])
    }

    /// Concurrent gets of keys one in every level of a composite share one get.
    @Test func pooledGetsOverTwoMappingsShareOnlyKeysOneInBoth() async throws {
        let gate = Gate()
        let inner = RecordingLevel<String, Int>(["foo": 7], gate: gate)
        let first = RecordingLevel<String, Int>().transformKeys { (key: String) in key.lowercased() }
        let second = inner.transformKeys { (key: String) in key.lowercased() }
        let flights = SharedFlights<StoredKey, Int>()
        let composite = first.compose(second)
        let level = composite.pooled(sharingByStoredKey: flights)
        let mapping = try #require(composite.keyMapping)
        let foo = try #require(try await mapping("foo"))
        let one = Task { try await level.get("Foo") }
        let two = Task { try await level.get("fOO") }
        #expect(await waitUntil { flights.waiterCount(forKey: foo) == 2 })
        gate.open()
        #expect(try await one.value == 7)
        #expect(try await two.value == 7)
        #expect(inner.gets == 1)
    }
}

/// Back-fills of a composite whose first level maps keys: a write of a key the first level makes one
/// with the key being filled wins over the fill, as a write of that key itself does.
extension MergedKeyCompositionTests {
    @Test(arguments: ["twoMappings", "mappedOverPlain"])
    func aBackFillDoesNotLandOverAWriteOfAKeyTheFirstLevelMakesOne(_ shape: String) async throws {
        let gate = Gate()
        let stored = Protected(["foo": "old", "Foo": "old"])
        let reads = Counter()
        let behind = BasicCache<String, String>(
            get: { key in
                // Read first, then wait: the fill holds what it read before the write.
                let value = stored.withLock { $0[key] }
                reads.increment()
                try await gate.wait()
                guard let value else { throw CacheError.notFound }
                return value
            },
            set: { value, key in stored.withLock { $0[key] = value } }
        )
        let front = RecordingLevel<String, String>()
        let next = shape == "twoMappings" ? Self.lowercased(behind) : behind
        let level = Self.lowercased(front.normalize()).compose(next)
        let fill = Task { try await level.get("Foo") }
        #expect(await waitUntil { reads.value == 1 })
        try await level.set("new", forKey: "foo")
        gate.open()
        _ = try await fill.value
        #expect(front.values == ["foo": "new"])
        #expect(try await level.get("FOO") == "new")
    }
}

/// Batches, pooled gets and back-fills through one composite of two mapping levels at once.
extension MergedKeyCompositionTests {
    /// Batch sets of one key in three spellings, with pooled gets of a fourth back-filling the first
    /// level all along: after each batch, both levels hold its last value, and a get returns it.
    @Test func mappedKeysUnderBatchesPooledGetsAndBackFillsOfACompositeStress() async throws {
        let front = Protected([String: Int]())
        let behind = Protected([String: Int]())
        func level(_ stored: Protected<[String: Int]>, dropsOnGet: Bool) -> BasicCache<String, Int> {
            BasicCache<String, Int>(
                get: { key in
                    let value = stored.withLock { dropsOnGet ? $0.removeValue(forKey: key) : $0[key] }
                    await Task.yield()
                    guard let value else { throw CacheError.notFound }
                    return value
                },
                set: { value, key in
                    await Task.yield()
                    stored.withLock { $0[key] = value }
                }
            )
            .transformKeys { (key: String) in key.lowercased() }
        }
        // The front level forgets what it hands out, so that every get back-fills it.
        let composite = level(front, dropsOnGet: true).compose(level(behind, dropsOnGet: false))
        let pooled = composite.pooled()
        let batch = pooled.allBatch()
        let isDone = Protected(false)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<2 {
                group.addTask {
                    while !isDone.withLock({ $0 }) {
                        _ = try? await pooled.get("kEY")
                        await Task.yield()
                    }
                }
            }
            for round in 0..<(200 * StressScale.rounds) {
                let values = [3 * round, 3 * round + 1, 3 * round + 2]
                try await batch.set(values, forKey: ["Key", "KEY", "key"])
                #expect(behind.withLock { $0["key"] } == values[2])
                let frontValue = front.withLock { $0["key"] }
                #expect(frontValue == nil || frontValue == values[2])
                #expect(try await pooled.get("kEy") == values[2])
            }
            isDone.withLock { $0 = true }
            try await group.waitForAll()
        }
    }
}
