import HoardTestSupport
import Testing

@testable import Hoard

/// A level whose `get` reads its value at once, then waits on a gate before returning it: a slow
/// level (disk, network) whose answer was read before a write landed.
private final class ReadThenWaitLevel: CacheLevel, Sendable {
    let values: Protected<[String: Int]>
    let gate: Gate
    let gets = Protected(0)

    init(_ values: [String: Int], gate: Gate) {
        self.values = Protected(values)
        self.gate = gate
    }

    func get(_ key: String) async throws -> Int {
        let value = values.withLock { $0[key] }
        gets.withLock { $0 += 1 }
        try await gate.wait()
        guard let value else { throw CacheError.notFound }
        return value
    }

    func set(_ value: Int, forKey key: String) async throws { values.withLock { $0[key] = value } }
    func removeValue(forKey key: String) async throws { values.withLock { $0[key] = nil } }
    func clear() async { values.withLock { $0.removeAll() } }
    func onMemoryWarning() {}
}

/// A memory level whose first `set` stores its value, then waits on a gate before returning: a
/// back-fill caught in its own store.
private final class StoreThenWaitLevel: CacheLevel, Sendable {
    let memory = MemoryCacheLevel<String, Int>(capacity: 4)
    let stored = Gate()
    let release = Gate()
    let sets = Protected(0)

    func get(_ key: String) async throws -> Int { try await memory.get(key) }

    func set(_ value: Int, forKey key: String) async throws {
        try await memory.set(value, forKey: key)
        let isFirst = sets.withLock { sets in
            defer { sets += 1 }
            return sets == 0
        }
        guard isFirst else { return }
        stored.open()
        try await release.wait()
    }

    func removeValue(forKey key: String) async throws { try await memory.removeValue(forKey: key) }
    func clear() async { await memory.clear() }
    func onMemoryWarning() {}
}

/// An origin whose writes do nothing, as a `Fetcher`'s.
private struct ZeroFetcher: Fetcher {
    func get(_ key: String) async throws -> Int { 0 }
}

/// Where a composition's writes meet a get in flight.
@Suite struct ComposedWriteRaceTests {
    @Test func aBackFillDoesNotResurrectAValueRemovedMeanwhile() async throws {
        let gate = Gate()
        let first = MemoryCacheLevel<String, Int>(capacity: 4)
        let second = ReadThenWaitLevel(["k": 1], gate: gate)
        let levels = first.compose(second)
        let reading = Task { try await levels.get("k") }
        #expect(await waitUntil { second.gets.withLock { $0 } == 1 })
        try await levels.removeValue(forKey: "k")  // removed from both levels
        gate.open()
        _ = try await reading.value  // started before the removal: may see the old value
        // The removal has completed, and nothing set the key since: it must stay a miss.
        await #expect(throws: CacheError.notFound) { try await levels.get("k") }
        #expect(first.cachedValue(forKey: "k") == nil)
    }

    /// `backed(by:)` writes to the first level only: a set made while a get read the other level
    /// stays, and the back-fill does not land over it.
    @Test func aReadThroughBackFillDoesNotOverwriteAValueSetMeanwhile() async throws {
        let gate = Gate()
        let first = MemoryCacheLevel<String, Int>(capacity: 4)
        let second = ReadThenWaitLevel(["k": 1], gate: gate)
        let levels = first.backed(by: second)
        let reading = Task { try await levels.get("k") }
        #expect(await waitUntil { second.gets.withLock { $0 } == 1 })
        try await levels.set(2, forKey: "k")  // the first level only
        gate.open()
        _ = try await reading.value
        #expect(try await levels.get("k") == 2)
        #expect(first.cachedValue(forKey: "k") == 2)
    }

    @Test func aBackFillDoesNotOverwriteAValueSetMeanwhile() async throws {
        let gate = Gate()
        let first = MemoryCacheLevel<String, Int>(capacity: 4)
        let second = ReadThenWaitLevel(["k": 1], gate: gate)
        let levels = first.compose(second)
        let reading = Task { try await levels.get("k") }
        #expect(await waitUntil { second.gets.withLock { $0 } == 1 })
        try await levels.set(2, forKey: "k")  // set in both levels
        gate.open()
        _ = try await reading.value
        #expect(try await levels.get("k") == 2)
        #expect(try await first.get("k") == 2)
    }

    @Test func aPooledGetThatStartsAfterASetDoesNotJoinAnOlderRead() async throws {
        let gate = Gate()
        let inner = ReadThenWaitLevel(["k": 1], gate: gate)
        let flights = SharedFlights<String, Int>()
        let level = inner.pooled(sharing: flights)
        let early = Task { try await level.get("k") }
        #expect(await waitUntil { inner.gets.withLock { $0 } == 1 })
        try await level.set(2, forKey: "k")
        // This get starts after the set returned: the pool must not hand it what was read before.
        let late = Task { try await level.get("k") }
        #expect(await waitUntil { inner.gets.withLock { $0 } == 2 || flights.waiterCount(forKey: "k") == 2 })
        gate.open()
        _ = try await early.value  // started before the set: may return the older value
        #expect(try await late.value == 2)
    }

    @Test func aPooledGetThatStartsAfterARemovalDoesNotJoinAnOlderRead() async throws {
        let gate = Gate()
        let inner = ReadThenWaitLevel(["k": 1], gate: gate)
        let flights = SharedFlights<String, Int>()
        let level = inner.pooled(sharing: flights)
        let early = Task { try await level.get("k") }
        #expect(await waitUntil { inner.gets.withLock { $0 } == 1 })
        try await level.removeValue(forKey: "k")
        let late = Task { try await level.get("k") }
        #expect(await waitUntil { inner.gets.withLock { $0 } == 2 || flights.waiterCount(forKey: "k") == 2 })
        gate.open()
        _ = try await early.value
        await #expect(throws: CacheError.notFound) { try await late.value }
    }

    /// A set that lands while the back-fill stores, over a `Fetcher` that keeps no write, is kept:
    /// the fill does not take the key out again (the set's value is nowhere else).
    @Test func aSetDuringTheFillsOwnStoreIsKeptOverAFetcher() async throws {
        let first = StoreThenWaitLevel()
        let levels = first.compose(ZeroFetcher())
        let reading = Task { try await levels.get("k") }
        try await first.stored.wait()  // the fill's 0 is stored; its set has not returned
        try await levels.set(1, forKey: "k")
        first.release.open()
        #expect(try await reading.value == 0)
        #expect(first.memory.cachedValue(forKey: "k") == 1)
        #expect(try await levels.get("k") == 1)
    }
}
