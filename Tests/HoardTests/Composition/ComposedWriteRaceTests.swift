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

/// A memory level whose first `set` (a back-fill's) waits on a gate before it stores its value: a
/// back-fill caught in its own store, its value not in yet.
private final class WaitThenStoreLevel: CacheLevel, Sendable {
    let memory = MemoryCacheLevel<String, Int>(capacity: 4)
    let storing = Gate()
    let release = Gate()
    let sets = Protected(0)

    func get(_ key: String) async throws -> Int { try await memory.get(key) }

    func set(_ value: Int, forKey key: String) async throws {
        let isFirst = sets.withLock { sets in
            defer { sets += 1 }
            return sets == 0
        }
        if isFirst {
            storing.open()
            try await release.wait()
        }
        try await memory.set(value, forKey: key)
    }

    func removeValue(forKey key: String) async throws { try await memory.removeValue(forKey: key) }
    func clear() async { await memory.clear() }
    func onMemoryWarning() {}
}

/// A level that reads its value, lets other tasks run, then returns it: a next level whose answer
/// may be older than a write made meanwhile.
private final class YieldingLevel: CacheLevel, Sendable {
    let values = Protected<[String: Int]>([:])

    func get(_ key: String) async throws -> Int {
        let value = values.withLock { $0[key] }
        await Task.yield()
        guard let value else { throw CacheError.notFound(key: key) }
        return value
    }

    func set(_ value: Int, forKey key: String) async throws { values.withLock { $0[key] = value } }
    func removeValue(forKey key: String) async throws { values.withLock { $0[key] = nil } }
    func clear() async { values.withLock { $0.removeAll() } }
    func onMemoryWarning() {}
}

/// An origin whose writes do nothing, as a `Fetcher`'s.
private struct ZeroFetcher: Fetcher {
    func get(_ key: String) async throws -> Int { 0 }
}

/// A user's write that races a back-fill's own store.
enum RacingWrite: CaseIterable, Sendable {
    case set, removal, clear
}

/// The compositions that back-fill their first level.
enum BackFilling: CaseIterable, Sendable {
    case compose, backed
}

/// Where a composition's writes meet a get in flight.
@Suite struct ComposedWriteRaceTests {
    /// A first level whose back-fill store waits for its release, composed over a `Fetcher` of 0s.
    private static func fillOverAFetcher(
        _ composition: BackFilling
    ) -> (first: WaitThenStoreLevel, watch: WriteWatch, levels: BasicCache<String, Int>) {
        let first = WaitThenStoreLevel()
        let watch = WriteWatch()
        let levels =
            switch composition {
            case .compose: first.composed(with: ZeroFetcher(), cachedValue: nil, watch: watch)
            case .backed: first.backed(by: ZeroFetcher(), watch: watch)
            }
        return (first, watch, levels)
    }

    /// A write that begins while a back-fill stores into the first level lands after that store, over
    /// a `Fetcher` as over any level: neither a removed value comes back nor a set value is lost.
    @Test(arguments: RacingWrite.allCases, BackFilling.allCases)
    func aWriteDuringTheFillsOwnStoreLandsAfterIt(write: RacingWrite, composition: BackFilling) async throws {
        let (first, watch, levels) = Self.fillOverAFetcher(composition)
        let reading = Task { try await levels.get("k") }
        try await first.storing.wait()  // the fill read 0 and is storing it; nothing is stored yet
        let written = Protected(false)
        let writing = Task {
            switch write {
            case .set: try await levels.set(1, forKey: "k")
            case .removal: try await levels.removeValue(forKey: "k")
            case .clear: await levels.clear()
            }
            written.withLock { $0 = true }
        }
        // The write has begun: it has returned, or it waits for the fill's store.
        #expect(await waitUntil { written.withLock { $0 } || watch.waitingWrites == 1 })
        first.release.open()
        #expect(try await reading.value == 0)
        try await writing.value
        #expect(first.memory.cachedValue(forKey: "k") == (write == .set ? 1 : nil))
    }

    /// A set or a removal waiting for a back-fill's store ends when its task is cancelled: it throws
    /// `CancellationError` without waiting for the store, writes nothing, and leaves the watch as
    /// it was.
    @Test(arguments: [RacingWrite.set, .removal], BackFilling.allCases)
    func aWriteWaitingForTheFillsStoreEndsWhenCancelled(write: RacingWrite, composition: BackFilling) async throws {
        let (first, watch, levels) = Self.fillOverAFetcher(composition)
        let reading = Task { try await levels.get("k") }
        try await first.storing.wait()  // the fill read 0 and is storing it
        let ended = Protected(false)
        let writing = Task {
            defer { ended.withLock { $0 = true } }
            switch write {
            case .set: try await levels.set(1, forKey: "k")
            case .removal: try await levels.removeValue(forKey: "k")
            case .clear: await levels.clear()
            }
        }
        #expect(await waitUntil(seconds: 600) { watch.waitingWrites == 1 })
        writing.cancel()
        // The store is still held: only the cancellation can end the write.
        #expect(await waitUntil(seconds: 600) { ended.withLock { $0 } })
        #expect(watch.waitingWrites == 0)
        first.release.open()
        await #expect(throws: CancellationError.self) { try await writing.value }
        #expect(try await reading.value == 0)
        // Nothing was written: the fill's value stays.
        #expect(first.memory.cachedValue(forKey: "k") == 0)
        // The stripe counts no write running: a later write lands, and a later fill stores.
        try await levels.removeValue(forKey: "k")
        #expect(first.memory.cachedValue(forKey: "k") == nil)
        #expect(try await levels.get("k") == 0)
        #expect(first.memory.cachedValue(forKey: "k") == 0)
    }

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

    /// Gets, their back-fills and writes of the same keys, all at once: once every write has
    /// returned, the first level holds each key's last value or nothing, never a value a back-fill
    /// read before it.
    @Test func backFillsNeverOutliveTheLastWriteOfTheirKey() async throws {
        let first = MemoryCacheLevel<String, Int>(capacity: 64)
        let second = YieldingLevel()
        let levels = first.compose(second)
        let keys = (0..<8).map { "k\($0)" }
        let writes = 200 * StressScale.rounds
        try await withThrowingTaskGroup(of: Void.self) { group in
            for key in keys {
                // One writer per key: its writes have an order, and the last one is the key's value.
                group.addTask {
                    for round in 0..<writes {
                        if round % 3 == 0 {
                            try await levels.removeValue(forKey: key)
                        } else {
                            try await levels.set(round, forKey: key)
                        }
                    }
                }
            }
            for _ in 0..<4 {
                group.addTask {
                    for _ in 0..<writes {
                        for key in keys { _ = try? await levels.get(key) }
                    }
                }
            }
            try await group.waitForAll()
        }
        for key in keys {
            let last = second.values.withLock { $0[key] }
            let kept = first.cachedValue(forKey: key)
            #expect(kept == nil || kept == last, "\(key): the first level holds \(kept ?? -1), not \(last ?? -1)")
        }
    }

    /// A set that begins while the back-fill stores, over a `Fetcher` that keeps no write, is kept:
    /// the fill does not take the key out again (the set's value is nowhere else).
    @Test func aSetDuringTheFillsOwnStoreIsKeptOverAFetcher() async throws {
        let first = StoreThenWaitLevel()
        let watch = WriteWatch()
        let levels = first.composed(with: ZeroFetcher(), cachedValue: nil, watch: watch)
        let reading = Task { try await levels.get("k") }
        try await first.stored.wait()  // the fill's 0 is stored; its set has not returned
        let setting = Task { try await levels.set(1, forKey: "k") }
        // The set has begun: it has returned, or it waits for the fill's store to return.
        #expect(await waitUntil { watch.waitingWrites == 1 || first.memory.cachedValue(forKey: "k") == 1 })
        first.release.open()
        try await setting.value
        #expect(try await reading.value == 0)
        #expect(first.memory.cachedValue(forKey: "k") == 1)
        #expect(try await levels.get("k") == 1)
    }
}
