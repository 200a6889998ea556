import Dispatch
import Foundation
import Hoard

/// `callstyles`: a memory hit through each way of reading: the subscript, `await getOrFetch` from
/// the main actor and from a detached task, and `asyncGet` with a callback.
///
/// A memory-only `Cache<Int>` (LRU) holds 100k keys; every read is a hit. The targets: `await
/// getOrFetch` from the main actor ≥ 0.5× the subscript's rate, from a detached task ≥ 0.7×, and
/// `asyncGet` ≥ 0.2×.
enum CallStyles {
    static let subscriptRow = "subscript cache[key]"
    static let mainActorRow = "await getOrFetch, main actor"
    static let detachedRow = "await getOrFetch, detached task"
    static let callbackRow = "asyncGet, callback"

    static func run(_ context: BenchContext) async throws -> ScenarioReport {
        let keyCount = context.size(100_000)
        let reads = context.size(1_000_000)
        let callbacks = context.size(200_000)
        let keys = makeKeys(keyCount)
        let indices = uniformIndices(count: reads, below: keyCount, seed: 0x4341_4C4C)
        let cache = try memoryOnlyCache(capacity: keyCount, policy: .lru)
        for (value, key) in keys.enumerated() { cache[key] = value }
        let expected = indices.reduce(UInt64(0)) { $0 &+ UInt64($1) }
        let expectedCallbacks = indices.prefix(callbacks).reduce(UInt64(0)) { $0 &+ UInt64($1) }

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
        ]
        report.rows = try await measureInterleaved(rows, plan: context.plan)
        report.reference = subscriptRow
        for (label, sum) in sums.all {
            let wanted = label == callbackRow ? expectedCallbacks : expected
            if sum != wanted { report.notes.append("\(label): wrong sum \(sum), expected \(wanted)") }
        }
        report.comparisons = [mainActorRow, detachedRow, callbackRow].map { ($0, subscriptRow) }
        report.summary = [(subscriptRow, subscriptRow), (mainActorRow, mainActorRow), (callbackRow, callbackRow)]
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
