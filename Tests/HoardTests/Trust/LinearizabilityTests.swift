import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Linearizability: many short random concurrent histories on a cache with memory
/// and disk, each checked against a sequential dictionary by searching for a valid linearization.
///
/// A history has 2–4 plain threads, each making 2–6 operations (set, get, remove, and `clearMemory`,
/// which must change nothing a reader can see) on keys 1…3. Every operation's invocation and
/// response take a number from one counter under a lock, which orders them in real time. After the
/// threads finish, the history goes on sequentially: a read of each key, `flush()`, `clearMemory()`,
/// a read of each key, then reads through a second cache opened on the container as a new process
/// would. The whole history must be linearizable (Wing & Gong: try every operation that could take
/// effect next, backtrack on a wrong result; memoized on the set of operations done and the model).
///
/// The levels are sized so that nothing is lost: memory holds 1 or 3 values (1 forces the reads
/// of evicted values through pending writes and files), disk holds 10.
///
/// Overlap needs both cores: run alone (`swift test --no-parallel --filter Linearizability`), about
/// four histories in five have operations of different threads overlapping; inside a full parallel
/// run, fewer. The configurations run one after another for that reason.
///
/// `HOARD_STRESS_ROUNDS=n` multiplies the number of histories (default 240).
@Suite(.serialized, .timeLimit(.minutes(10)))
struct LinearizabilityTests {
    init() { TestLog.install() }

    static var historiesPerConfiguration: Int { 60 * StressScale.rounds }

    // MARK: - Histories and the checker

    /// One operation on the model: a dictionary from key numbers to value numbers.
    enum Operation: Hashable, Sendable, CustomStringConvertible {
        case set(key: Int, value: Int)
        case get(key: Int)
        case remove(key: Int)
        /// Must not change what any key holds.
        case clearMemory
        /// `flush()`: must not change what any key holds either.
        case flush

        var description: String {
            switch self {
            case .set(let key, let value): "set(k\(key), \(value))"
            case .get(let key): "get(k\(key))"
            case .remove(let key): "remove(k\(key))"
            case .clearMemory: "clearMemory"
            case .flush: "flush"
            }
        }
    }

    /// One operation as it happened: what was asked, what came back, and when (counter values).
    struct Event: Sendable, CustomStringConvertible {
        var thread: Int
        var operation: Operation
        /// What a get returned (`nil` for a miss and for other operations).
        var result: Int?
        var invoked: Int
        var responded: Int

        var description: String {
            let result = if case .get = operation { " → \(self.result.map(String.init) ?? "nil")" } else { "" }
            return "[\(invoked)–\(responded)] thread \(thread): \(operation)\(result)"
        }
    }

    /// Hands out increasing numbers to invocations and responses across threads.
    final class Recorder: Sendable {
        private let state = Protected((clock: 0, events: [Event]()))

        func tick() -> Int {
            state.withLock { state in
                state.clock += 1
                return state.clock
            }
        }

        func record(_ event: Event) { state.withLock { $0.events.append(event) } }

        var events: [Event] { state.withLock { $0.events } }
    }

    /// Whether some order of the events, consistent with their real-time order, is a valid
    /// sequential run of a dictionary that starts empty.
    static func isLinearizable(_ events: [Event], keyCount: Int = 3) -> Bool {
        precondition(events.count <= 64, "the search keeps the done operations in 64 bits")
        let all: UInt64 = events.count == 64 ? .max : (1 << events.count) - 1
        struct Visit: Hashable {
            var done: UInt64
            var model: [Int?]
        }
        var visited = Set<Visit>()
        func search(_ done: UInt64, _ model: [Int?]) -> Bool {
            if done == all { return true }
            guard visited.insert(Visit(done: done, model: model)).inserted else { return false }
            // An operation can take effect next if no pending operation responded before it was invoked.
            var earliestResponse = Int.max
            for (index, event) in events.enumerated() where done & (1 << index) == 0 {
                earliestResponse = min(earliestResponse, event.responded)
            }
            for (index, event) in events.enumerated() where done & (1 << index) == 0 && event.invoked < earliestResponse
            {
                var next = model
                switch event.operation {
                case .set(let key, let value): next[key] = value
                case .remove(let key): next[key] = nil
                case .get(let key): guard model[key] == event.result else { continue }
                case .clearMemory, .flush: break
                }
                if search(done | (1 << index), next) { return true }
            }
            return false
        }
        return search(0, [Int?](repeating: nil, count: keyCount + 1))
    }

    // MARK: - The checker can fail

    @Test func theCheckerRejectsHistoriesNoDictionaryCouldProduce() {
        func event(
            _ thread: Int,
            _ operation: Operation,
            returns result: Int? = nil,
            at span: ClosedRange<Int>
        ) -> Event {
            Event(
                thread: thread,
                operation: operation,
                result: result,
                invoked: span.lowerBound,
                responded: span.upperBound
            )
        }
        // A completed set, then a later get that misses.
        #expect(
            !Self.isLinearizable([
                event(0, .set(key: 1, value: 5), at: 0...1), event(1, .get(key: 1), returns: nil, at: 2...3),
            ])
        )
        // A stale read after an overwrite that completed before it.
        #expect(
            !Self.isLinearizable([
                event(0, .set(key: 1, value: 1), at: 0...1), event(0, .set(key: 1, value: 2), at: 2...3),
                event(1, .get(key: 1), returns: 1, at: 4...5),
            ])
        )
        // A value never written, and a value read from another key.
        #expect(!Self.isLinearizable([event(0, .get(key: 1), returns: 9, at: 0...1)]))
        #expect(
            !Self.isLinearizable([
                event(0, .set(key: 2, value: 7), at: 0...1), event(1, .get(key: 1), returns: 7, at: 2...3),
            ])
        )
        // Two reads that disagree on the order of two overlapping sets.
        #expect(
            !Self.isLinearizable([
                event(0, .set(key: 1, value: 1), at: 0...10), event(1, .set(key: 1, value: 2), at: 1...11),
                event(2, .get(key: 1), returns: 1, at: 12...13), event(2, .get(key: 1), returns: 2, at: 14...15),
                event(3, .get(key: 1), returns: 2, at: 16...17),
            ])
        )
        // clearMemory must not lose a value.
        #expect(
            !Self.isLinearizable([
                event(0, .set(key: 3, value: 1), at: 0...1), event(0, .clearMemory, at: 2...3),
                event(1, .get(key: 3), returns: nil, at: 4...5),
            ])
        )
        // …while overlapping operations may take effect in either order.
        #expect(
            Self.isLinearizable([
                event(0, .set(key: 1, value: 1), at: 0...10), event(1, .set(key: 1, value: 2), at: 1...11),
                event(2, .get(key: 1), returns: 2, at: 2...3), event(3, .get(key: 1), returns: 1, at: 12...13),
            ])
        )
        #expect(
            Self.isLinearizable([
                event(0, .set(key: 1, value: 5), at: 0...3), event(1, .get(key: 1), returns: nil, at: 1...2),
            ])
        )
    }

    // MARK: - Histories of the cache

    @Test(arguments: EvictionPolicy.allCases, [1, 3])
    func concurrentHistoriesAreLinearizable(policy: EvictionPolicy, memoryCount: Int) async throws {
        let folder = TemporaryDirectory()
        var random = SplitMix64(seed: UInt64(memoryCount * 10 + (policy == .lru ? 1 : 2)))
        for history in 0..<Self.historiesPerConfiguration {
            let name = "h\(history)"
            let builder = folder.stringBuilder(name).evictionPolicy(policy).maxRamCount(memoryCount).maxDiskCount(10)
            let cache = try builder.build()
            let recorder = Recorder()
            let threadCount = Int.random(in: 2...4, using: &random)
            let plans: [[Operation]] = (0..<threadCount).map { thread in
                (0..<Int.random(in: 2...6, using: &random)).map { step in
                    let key = Int.random(in: 1...3, using: &random)
                    switch Int.random(in: 0..<100, using: &random) {
                    case 0..<40: return .set(key: key, value: thread * 100 + step)
                    case 40..<80: return .get(key: key)
                    case 80..<95: return .remove(key: key)
                    default: return .clearMemory
                    }
                }
            }
            // Mostly no pause, so that operations bunch up; sometimes a short one, to shift the interleaving.
            let pauses = (0..<threadCount).map { _ in
                (0..<6).map { _ in Bool.random(using: &random) ? 0 : Int.random(in: 0..<50, using: &random) }
            }
            await runConcurrently(plans, pauses: pauses, on: cache, recorder: recorder)

            // Sequential tail: reads, then flush and clearMemory, reads, then a restart's reads.
            for key in 1...3 { perform(.get(key: key), thread: 9, on: cache, recorder: recorder) }
            let invoked = recorder.tick()
            await cache.flush()
            recorder.record(
                Event(thread: 9, operation: .flush, result: nil, invoked: invoked, responded: recorder.tick())
            )
            perform(.clearMemory, thread: 9, on: cache, recorder: recorder)
            for key in 1...3 { perform(.get(key: key), thread: 9, on: cache, recorder: recorder) }
            let restarted = try builder.build(sharingStore: false)
            for key in 1...3 { perform(.get(key: key), thread: 10, on: restarted, recorder: recorder) }

            let events = recorder.events
            let linearizable = Self.isLinearizable(events)
            let details = events.sorted { $0.invoked < $1.invoked }.map(\.description).joined(separator: "\n")
            #expect(linearizable, "history \(history) (\(policy), memory \(memoryCount)):\n\(details)")
            if !linearizable { return }
        }
    }

    /// Runs each plan on a plain thread of its own, all released together once every one has started.
    private func runConcurrently(
        _ plans: [[Operation]],
        pauses: [[Int]],
        on cache: Cache<String>,
        recorder: Recorder
    ) async {
        let barrier = ThreadBarrier(count: plans.count)
        await withTaskGroup(of: Void.self) { group in
            for (thread, plan) in plans.enumerated() {
                group.addTask {
                    await onPlainThread {
                        barrier.wait()
                        for (step, operation) in plan.enumerated() {
                            spin(pauses[thread][step])
                            perform(operation, thread: thread, on: cache, recorder: recorder)
                        }
                    }
                }
            }
        }
    }
}

/// Holds plain threads until `count` of them have arrived, then lets them all go at once.
///
/// The waiting threads spin (yielding the processor), so that the ones running when the last arrives
/// start together instead of one by one as a sleeping wait would wake them.
private final class ThreadBarrier: Sendable {
    private let count: Int
    private let arrived = Protected(0)

    init(count: Int) { self.count = count }

    func wait() {
        arrived.withLock { $0 += 1 }
        while arrived.withLock({ $0 }) < count { sched_yield() }
    }
}

/// Performs one operation on the cache and records it.
private func perform(
    _ operation: LinearizabilityTests.Operation,
    thread: Int,
    on cache: Cache<String>,
    recorder: LinearizabilityTests.Recorder
) {
    var result: Int?
    let invoked = recorder.tick()
    switch operation {
    case .set(let key, let value): cache["k\(key)"] = String(value)
    case .get(let key): result = cache["k\(key)"].flatMap { Int($0) }
    case .remove(let key): cache["k\(key)"] = nil
    case .clearMemory: cache.clearMemory()
    case .flush: preconditionFailure("flush is async; the caller records it")
    }
    let responded = recorder.tick()
    recorder.record(
        LinearizabilityTests.Event(
            thread: thread,
            operation: operation,
            result: result,
            invoked: invoked,
            responded: responded
        )
    )
}

/// Busy-waits a little, to vary where threads interleave.
private func spin(_ iterations: Int) {
    var sink = 0
    for index in 0..<iterations * 10 { sink &+= index }
    withExtendedLifetime(sink) {}
}
