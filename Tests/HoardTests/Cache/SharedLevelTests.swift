import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// The shared level's write queue: ``SharedLevel/flush()`` returns only once the level has, for
/// every key, the state the key had when it was called (or a later one), whatever replaced or dropped
/// the writes queued before it.
@Suite(.timeLimit(.minutes(10)))
struct SharedLevelTests {
    init() { TestLog.install() }

    /// A level in memory whose sets of chosen values, and whose clears when asked, wait at a gate
    /// until the test opens it; it tells which have begun.
    final class GatedLevel: CacheLevel, Sendable {
        typealias Key = String
        typealias Value = Data

        private struct State {
            var values: [String: Data] = [:]
            var begun: [Data] = []
            var clearsBegun = 0
            var clearsMade = 0
        }

        private let state = Protected(State())
        private let gates: [Data: Gate]
        private let clearGate: Gate?

        init(holding held: [String] = [], holdingClears: Bool = false) {
            gates = Dictionary(uniqueKeysWithValues: held.map { (Data($0.utf8), Gate()) })
            clearGate = holdingClears ? Gate() : nil
        }

        func value(_ key: String) -> String? {
            state.withLock { $0.values[key] }.map { String(decoding: $0, as: UTF8.self) }
        }
        func hasBegun(_ value: String) -> Bool { state.withLock { $0.begun.contains(Data(value.utf8)) } }
        var clearsBegun: Int { state.withLock { $0.clearsBegun } }
        func open(_ value: String) { gates[Data(value.utf8)]?.open() }
        func openClears() { clearGate?.open() }

        func get(_ key: String) async throws -> Data {
            guard let value = state.withLock({ $0.values[key] }) else { throw CacheError.notFound(key: key) }
            return value
        }

        func set(_ value: Data, forKey key: String) async throws {
            state.withLock { $0.begun.append(value) }
            try await gates[value]?.wait()
            state.withLock { $0.values[key] = value }
        }

        func removeValue(forKey key: String) async throws { state.withLock { $0.values[key] = nil } }

        func clear() async {
            state.withLock { $0.clearsBegun += 1 }
            try? await clearGate?.wait()
            state.withLock {
                $0.values = [:]
                $0.clearsMade += 1
            }
        }

        func onMemoryWarning() {}
    }

    static func set(_ value: String) -> SharedLevel.Operation {
        .set(encode: { Data(value.utf8) }, expiresAt: nil)
    }

    /// Starts a flush and returns once it waits.
    static func startFlush(_ shared: SharedLevel) async -> Task<Void, Never> {
        let waiting = shared.waitingFlushCount
        let flush = Task { await shared.flush() }
        #expect(await waitUntil { shared.waitingFlushCount == waiting + 1 })
        return flush
    }

    @Test func aFlushWaitsForTheWriteThatReplacedOneQueuedBeforeIt() async throws {
        let level = GatedLevel(holding: ["1", "3"])
        let shared = SharedLevel(level) { _, _ in }
        shared.enqueue(Self.set("1"), forKey: "k")
        #expect(await waitUntil { level.hasBegun("1") })
        // "2" waits behind "1"; the flush waits for it.
        shared.enqueue(Self.set("2"), forKey: "k")
        let flush = await Self.startFlush(shared)
        // "3" replaces "2" before a worker took it: the flush now waits for "3".
        shared.enqueue(Self.set("3"), forKey: "k")
        level.open("1")
        #expect(await waitUntil { level.hasBegun("3") })
        #expect(level.value("k") == "1")
        #expect(shared.waitingFlushCount == 1, "the flush returned while the level held neither 2 nor 3")
        level.open("3")
        await flush.value
        #expect(level.value("k") == "3")
        #expect(!level.hasBegun("2"))
    }

    @Test func aFlushAndASaveWaitForTheClearThatDroppedTheirWrite() async throws {
        let level = GatedLevel(holding: ["1"], holdingClears: true)
        let shared = SharedLevel(level) { _, _ in }
        shared.enqueue(Self.set("1"), forKey: "k")
        #expect(await waitUntil { level.hasBegun("1") })
        let saved = Protected<Result<Void, CacheError>?>(nil)
        shared.enqueue(Self.set("2"), forKey: "k") { result in saved.withLock { $0 = result } }
        let flush = await Self.startFlush(shared)
        // The clear drops "2": the level's state for the key will be none, once the clear is made.
        shared.clear()
        level.open("1")
        #expect(await waitUntil { level.clearsBegun == 1 })
        #expect(level.value("k") == "1")
        #expect(shared.waitingFlushCount == 1, "the flush returned before the clear that dropped its write")
        #expect(saved.withLock { $0 == nil }, "the save returned before the clear that dropped its write")
        level.openClears()
        await flush.value
        #expect(level.value("k") == nil)
        #expect(saved.withLock { $0.map { (try? $0.get()) != nil } } == true)
        #expect(!level.hasBegun("2"))
    }

    /// A level that can say its clear failed (as a Redis level does when a server is down), and
    /// fails it when told to.
    final class FailingClearLevel: CacheLevel, ClearReportingCacheLevel, Sendable {
        typealias Key = String
        typealias Value = Data

        let values = Protected([String: Data]())
        let clearFails: Bool
        let clears = Protected(0)
        /// Holds the first clear until opened.
        let firstClear = Gate()

        init(clearFails: Bool) { self.clearFails = clearFails }

        func get(_ key: String) async throws -> Data {
            guard let value = values.withLock({ $0[key] }) else { throw CacheError.notFound(key: key) }
            return value
        }
        func set(_ value: Data, forKey key: String) async throws { values.withLock { $0[key] = value } }
        func removeValue(forKey key: String) async throws { values.withLock { $0[key] = nil } }
        func clear() async { try? await removeAll() }
        func removeAll() async throws {
            let count = clears.withLock { clears in
                clears += 1
                return clears
            }
            if count == 1 { try await firstClear.wait() }
            if clearFails { throw CacheError.io("the server went away") }
            values.withLock { $0 = [:] }
        }
        func onMemoryWarning() {}
    }

    /// A save whose write a clear dropped returns what the clear did: the level holds nothing for the
    /// key after a clear that was made, and may still hold an older value after one that failed.
    @Test(arguments: [false, true])
    func aSaveDroppedByAClearFailsWhenTheClearFails(clearFails: Bool) async throws {
        let level = FailingClearLevel(clearFails: clearFails)
        level.values.withLock { $0["k"] = Data("old".utf8) }
        let reported = Protected([String]())
        let shared = SharedLevel(level) { key, _ in reported.withLock { $0.append(key) } }
        let saved = Protected<Result<Void, CacheError>?>(nil)
        // Queued behind a clear under way, so the next clear drops it for sure.
        shared.clear()
        #expect(await waitUntil { level.clears.withLock { $0 } == 1 })
        shared.enqueue(Self.set("new"), forKey: "k") { result in saved.withLock { $0 = result } }
        shared.clear()
        level.firstClear.open()
        await shared.flush()
        #expect(level.clears.withLock { $0 } == 2)
        let result = try #require(saved.withLock { $0 })
        if clearFails {
            #expect(level.values.withLock { $0["k"] } == Data("old".utf8))
            #expect(throws: CacheError.self, "a save reported made while the level still holds the old value") {
                try result.get()
            }
            // Reported as a failed write of its key, as a save's own failed write is.
            #expect(reported.withLock { $0 } == ["k"])
        } else {
            #expect(level.values.withLock { $0["k"] } == nil)
            #expect(throws: Never.self) { try result.get() }
            #expect(reported.withLock { $0 }.isEmpty)
        }
    }

    /// A level that records, for each key, the sequence number of the value it holds, and how many
    /// clears it made; each set yields first, so that writes interleave.
    final class RecordingLevel: CacheLevel, Sendable {
        typealias Key = String
        typealias Value = Data

        let state = Protected((values: [String: Int](), clearsMade: 0))

        func get(_ key: String) async throws -> Data {
            guard let value = state.withLock({ $0.values[key] }) else { throw CacheError.notFound(key: key) }
            return Data(String(value).utf8)
        }

        func set(_ value: Data, forKey key: String) async throws {
            await Task.yield()
            await Task.yield()
            let sequence = Int(String(decoding: value, as: UTF8.self)) ?? -1
            state.withLock { $0.values[key] = sequence }
        }

        func removeValue(forKey key: String) async throws { state.withLock { $0.values[key] = nil } }

        func clear() async {
            await Task.yield()
            state.withLock {
                $0.values = [:]
                $0.clearsMade += 1
            }
        }

        func onMemoryWarning() {}
    }

    /// Round after round, writers set a few keys (each write replacing the one queued before it, or
    /// waiting behind the one under way), now and then a clear drops what is queued, and flushers
    /// check, each time a flush returns, that the level holds for every key the value queued last
    /// before the flush, or a later one (or that a clear asked for since has emptied it).
    @Test func stressAFlushNeverReturnsBeforeTheWritesQueuedBeforeItLanded() async throws {
        let level = RecordingLevel()
        let shared = SharedLevel(level) { _, _ in }
        let keys = (0..<4).map { "k\($0)" }
        // What was queued, in the order it was queued: the last sequence number set for each key,
        // the number of clears and the sequence number of the last one.
        let queued = Protected((sequence: 0, latest: [String: Int](), clears: 0, lastClear: 0))
        let problems = Protected([String]())
        let flushes = Counter()
        for round in 0..<(300 * StressScale.rounds) {
            await withTaskGroup(of: Void.self) { group in
                for writer in 0..<4 {
                    group.addTask {
                        var random = SplitMix64(seed: UInt64(round * 8 + writer))
                        for _ in 0..<8 {
                            let key = keys[Int.random(in: 0..<keys.count, using: &random)]
                            queued.withLock { queued in
                                queued.sequence += 1
                                queued.latest[key] = queued.sequence
                                shared.enqueue(Self.set(String(queued.sequence)), forKey: key)
                            }
                            await Task.yield()
                        }
                    }
                }
                if round % 10 == 9 {
                    group.addTask {
                        await Task.yield()
                        queued.withLock { queued in
                            queued.sequence += 1
                            queued.clears += 1
                            queued.lastClear = queued.sequence
                            shared.clear()
                        }
                    }
                }
                for _ in 0..<2 {
                    group.addTask {
                        for _ in 0..<3 {
                            await Task.yield()
                            let before = queued.withLock { $0 }
                            await shared.flush()
                            _ = flushes.increment()
                            let (values, clearsMade) = level.state.withLock { ($0.values, $0.clearsMade) }
                            if clearsMade < before.clears {
                                problems.withLock { $0.append("\(clearsMade) clears made of \(before.clears)") }
                            }
                            // A clear asked for after the flush began may have emptied the level since.
                            guard clearsMade == before.clears else { continue }
                            for (key, sequence) in before.latest where sequence > before.lastClear {
                                if (values[key] ?? -1) < sequence {
                                    problems.withLock {
                                        $0.append(
                                            "\(key): \(values[key] ?? -1) after a flush, \(sequence) queued before"
                                        )
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        await shared.flush()
        #expect(flushes.value == 300 * StressScale.rounds * 6)
        let problemList = problems.withLock { $0 }
        #expect(problemList.isEmpty, "\(problemList.count) problems: \(problemList.prefix(5))")
        let latest = queued.withLock { $0 }
        for (key, sequence) in latest.latest where sequence > latest.lastClear {
            #expect(level.state.withLock { $0.values[key] } == sequence)
        }
    }
}

/// A backlog of writes, longer than the queue's compaction size: every write is made once, and
/// each flush returns only once the writes queued before it are made.
extension SharedLevelTests {
    /// A level whose writes all wait at one gate until it opens.
    final class BackloggedLevel: CacheLevel, Sendable {
        typealias Key = String
        typealias Value = Data

        let gate = Gate()
        let values = Protected([String: Data]())
        let writes = Protected(0)
        let begun = Protected(0)

        func get(_ key: String) async throws -> Data {
            guard let value = values.withLock({ $0[key] }) else { throw CacheError.notFound(key: key) }
            return value
        }
        func set(_ value: Data, forKey key: String) async throws {
            begun.withLock { $0 += 1 }
            try await gate.wait()
            writes.withLock { $0 += 1 }
            values.withLock { $0[key] = value }
        }
        func removeValue(forKey key: String) async throws { values.withLock { $0[key] = nil } }
        func clear() async { values.withLock { $0 = [:] } }
        func onMemoryWarning() {}
    }

    @Test func aLongBacklogIsWrittenOnceAndEachFlushWaitsForItsPart() async throws {
        let level = BackloggedLevel()
        let shared = SharedLevel(level) { _, _ in }
        let count = 3_000
        for index in 0..<count { shared.enqueue(Self.set("first \(index)"), forKey: "k\(index)") }
        // Every worker holds one write at the gate: the first keys, k0 to k7.
        #expect(await waitUntil { level.begun.withLock { $0 } == SharedLevel.workerLimit })
        let first = Task {
            await shared.flush()
            // Every write queued before this flush is made when it returns.
            let values = level.values.withLock { $0 }
            return (0..<count).allSatisfy { values["k\($0)"] != nil }
        }
        #expect(await waitUntil { shared.waitingFlushCount == 1 })
        for index in count..<(2 * count) { shared.enqueue(Self.set("second \(index)"), forKey: "k\(index)") }
        // Replaced while queued: only the latest is written.
        for index in stride(from: 0, to: 2 * count, by: 7) {
            shared.enqueue(Self.set("latest \(index)"), forKey: "k\(index)")
        }
        let second = await Self.startFlush(shared)
        level.gate.open()
        #expect(await first.value)
        await second.value
        let values = level.values.withLock { $0 }
        #expect(values.count == 2 * count)
        for index in 0..<(2 * count) {
            let written = values["k\(index)"].map { String(decoding: $0, as: UTF8.self) }
            // The writes under way (k0 to k7) when the others were replaced were made with their first
            // value, then again with the latest.
            let expected = index % 7 == 0 ? "latest \(index)" : index < count ? "first \(index)" : "second \(index)"
            #expect(written == expected, "k\(index)")
        }
        let replacedUnderWay = (0..<SharedLevel.workerLimit).filter { $0 % 7 == 0 }.count
        #expect(level.writes.withLock { $0 } == 2 * count + replacedUnderWay)
    }
}
