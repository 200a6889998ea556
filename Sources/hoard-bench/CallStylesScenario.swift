import Dispatch
import Foundation
import Hoard

/// `callstyles`: a memory hit through each way of reading: the subscript, `await getOrFetch` from
/// the main actor and from a detached task, and `asyncGet` with a callback, both with every call in
/// flight at once and with one call awaited after another.
///
/// A memory-only `Cache<Int>` (LRU) holds 100k keys; every read is a hit. The targets: `await
/// getOrFetch` from the main actor ≥ 0.5× the subscript's rate, from a detached task ≥ 0.7×,
/// `asyncGet` ≥ 0.2×, and `asyncGet` awaited one after another ≤ 5 µs a call (≥ 200 k/s).
///
/// A call awaited before the next hands over to another thread and back, as any callback does
/// that never runs on its caller's thread. What that costs on the host, measured in the same run,
/// is a task awaiting a callback from a plain dispatch queue, no cache involved (two threads woken
/// a call). Where that is slower than the target and Hoard is too, but no slower than it, the
/// host's wake-ups are too slow for the run to judge the target; Hoard's completion thread stays
/// awake between calls, so it can be faster than this row.
enum CallStyles {
    static let subscriptRow = "subscript cache[key]"
    static let mainActorRow = "await getOrFetch, main actor"
    static let detachedRow = "await getOrFetch, detached task"
    static let callbackRow = "asyncGet, callback"
    static let awaitedRow = "asyncGet, one awaited after another"
    static let plainQueueRow = "DispatchQueue callback awaited, no cache (the host's wake-ups)"
    /// The most time an awaited `asyncGet` hit may take.
    static let awaitedTarget = Duration.microseconds(5)

    static func run(_ context: BenchContext) async throws -> ScenarioReport {
        let keyCount = context.size(100_000)
        let reads = context.size(1_000_000)
        let callbacks = context.size(200_000)
        let awaited = context.size(20_000)
        let keys = makeKeys(keyCount)
        let indices = uniformIndices(count: reads, below: keyCount, seed: 0x4341_4C4C)
        let cache = try memoryOnlyCache(capacity: keyCount, policy: .lru)
        for (value, key) in keys.enumerated() { cache[key] = value }
        let expected = indices.reduce(UInt64(0)) { $0 &+ UInt64($1) }
        let expectedCallbacks = indices.prefix(callbacks).reduce(UInt64(0)) { $0 &+ UInt64($1) }
        let expectedAwaited = indices.prefix(awaited).reduce(UInt64(0)) { $0 &+ UInt64($1) }

        var report = ScenarioReport(
            name: "callstyles",
            title: "memory hits through each way of reading, memory-only Cache<Int> (lru) of \(grouped(keyCount)) keys"
        )
        let sums = SumBox()
        let rows = [
            Contender(label: subscriptRow, operations: reads) {
                var sum: UInt64 = 0
                let elapsed = time { for index in indices { sum &+= UInt64(cache[keys[index]] ?? 0) } }
                sums.record(subscriptRow, sum)
                return elapsed
            },
            Contender(label: mainActorRow, operations: reads) {
                let (elapsed, sum) = try await readOnMainActor(cache, keys, indices)
                sums.record(mainActorRow, sum)
                return elapsed
            },
            Contender(label: detachedRow, operations: reads) {
                let (elapsed, sum) = try await Task.detached { try await read(cache, keys, indices) }.value
                sums.record(detachedRow, sum)
                return elapsed
            },
            Contender(label: callbackRow, operations: callbacks) {
                let (elapsed, sum) = readWithCallbacks(cache, keys, indices.prefix(callbacks))
                sums.record(callbackRow, sum)
                return elapsed
            },
            Contender(label: awaitedRow, operations: awaited) {
                let slice = Array(indices.prefix(awaited))
                let (elapsed, sum) = try await Task.detached { try await readAwaitingCallbacks(cache, keys, slice) }
                    .value
                sums.record(awaitedRow, sum)
                return elapsed
            },
            Contender(label: plainQueueRow, operations: awaited) {
                await Task.detached { await awaitQueueCallbacks(count: awaited) }.value
            },
        ]
        report.rows = try await measureInterleaved(rows, plan: context.plan)
        report.reference = subscriptRow
        for (label, sum) in sums.all {
            let wanted =
                switch label {
                case callbackRow: expectedCallbacks
                case awaitedRow: expectedAwaited
                default: expected
                }
            if sum != wanted { report.notes.append("\(label): wrong sum \(sum), expected \(wanted)") }
        }
        report.comparisons = [mainActorRow, detachedRow, callbackRow, awaitedRow].map { ($0, subscriptRow) }
        report.summary = [
            (subscriptRow, subscriptRow), (mainActorRow, mainActorRow), (callbackRow, callbackRow),
            (awaitedRow, awaitedRow),
        ]
        for label in [callbackRow, awaitedRow, plainQueueRow] {
            guard let row = report.row(label) else { continue }
            report.lines.append(
                "\(label): \(formatMicroseconds(1 / row.median)) a call (median; \(formatMicroseconds(1 / row.maximum)) – "
                    + "\(formatMicroseconds(1 / row.minimum)))"
            )
        }
        report.targets = [
            TargetCheck.ratio(
                "await getOrFetch hit, main actor ≥ 0.5× subscript",
                report.row(mainActorRow),
                report.row(subscriptRow),
                atLeast: 0.5
            ),
            TargetCheck.ratio(
                "await getOrFetch hit, detached task ≥ 0.7× subscript",
                report.row(detachedRow),
                report.row(subscriptRow),
                atLeast: 0.7
            ),
            TargetCheck.ratio(
                "asyncGet hit ≥ 0.2× subscript",
                report.row(callbackRow),
                report.row(subscriptRow),
                atLeast: 0.2
            ),
            awaitedCheck(report.row(awaitedRow), plainQueue: report.row(plainQueueRow)),
        ]
        report.checksum = expected
        return report
    }

    @MainActor
    static func readOnMainActor(
        _ cache: Cache<Int>,
        _ keys: [String],
        _ indices: [Int]
    ) async throws -> (Duration, UInt64) {
        try await read(cache, keys, indices)
    }

    /// Reads every index with `await getOrFetch`, on the caller's executor.
    nonisolated(nonsending) static func read(
        _ cache: Cache<Int>,
        _ keys: [String],
        _ indices: [Int]
    ) async throws -> (Duration, UInt64) {
        let clock = ContinuousClock()
        let start = clock.now
        var sum: UInt64 = 0
        for index in indices { sum &+= UInt64(try await cache.getOrFetch(forKey: keys[index])) }
        return (start.duration(to: clock.now), sum)
    }

    /// Asks for every index with `asyncGet` and waits until every completion has run.
    static func readWithCallbacks(
        _ cache: Cache<Int>,
        _ keys: [String],
        _ indices: ArraySlice<Int>
    ) -> (Duration, UInt64) {
        let done = DispatchGroup()
        let sum = SumBox()
        let clock = ContinuousClock()
        let start = clock.now
        for index in indices {
            done.enter()
            cache.asyncGet(forKey: keys[index]) { result in
                sum.add(UInt64((try? result.get()) ?? 0))
                done.leave()
            }
        }
        done.wait()
        return (start.duration(to: clock.now), sum.total)
    }

    /// Asks for every index with `asyncGet`, awaiting each completion before the next call.
    static func readAwaitingCallbacks(
        _ cache: Cache<Int>,
        _ keys: [String],
        _ indices: [Int]
    ) async throws -> (Duration, UInt64) {
        let clock = ContinuousClock()
        let start = clock.now
        var sum: UInt64 = 0
        for index in indices {
            let value: Int = try await withCheckedThrowingContinuation { continuation in
                cache.asyncGet(forKey: keys[index]) { continuation.resume(with: $0) }
            }
            sum &+= UInt64(value)
        }
        return (start.duration(to: clock.now), sum)
    }

    /// The awaited row's target, judged unless both it and a plain queue's callback are slower than
    /// it, Hoard no slower than the plain queue.
    static func awaitedCheck(_ awaited: Measurement?, plainQueue: Measurement?) -> TargetCheck {
        let limit = 1 / awaitedTarget.seconds
        let check = TargetCheck.rate(
            "asyncGet hit, one awaited after another ≤ \(formatMicroseconds(awaitedTarget.seconds)) a call",
            awaited,
            atLeast: limit
        )
        guard let awaited, let plainQueue else { return check }
        var result = TargetCheck(
            target: check.target,
            measured: "\(formatMicroseconds(1 / awaited.median)) a call; a plain queue's callback awaited: "
                + formatMicroseconds(1 / plainQueue.median),
            holds: check.holds
        )
        // Not judged only where the host's wake-ups are too slow and Hoard is not slower than them.
        result.isJudged = check.holds || plainQueue.median >= limit || awaited.median < plainQueue.median
        return result
    }

    /// Awaits `count` callbacks one after another, each run on a dispatch queue: the two hand-overs
    /// between threads that an awaited `asyncGet` makes, with nothing else.
    static func awaitQueueCallbacks(count: Int) async -> Duration {
        let queue = DispatchQueue(label: "hoard-bench.plain-queue")
        let clock = ContinuousClock()
        let start = clock.now
        for _ in 0..<count {
            await withCheckedContinuation { continuation in queue.async { continuation.resume() } }
        }
        return start.duration(to: clock.now)
    }

    /// `seconds` in microseconds, as in `4.2 µs`.
    static func formatMicroseconds(_ seconds: Double) -> String {
        String(format: "%.1f µs", seconds * 1e6)
    }
}

/// Sums and per-row results shared with completions, behind a lock.
private final class SumBox: @unchecked Sendable {
    // Safe because every property is only touched while holding `lock`.
    private let lock = NSLock()
    private var sum: UInt64 = 0
    private var rows: [(String, UInt64)] = []

    func add(_ value: UInt64) { lock.withLock { sum &+= value } }
    var total: UInt64 { lock.withLock { sum } }
    func record(_ label: String, _ value: UInt64) { lock.withLock { rows.append((label, value)) } }
    var all: [(String, UInt64)] { lock.withLock { rows } }
}
