import Foundation
import Hoard

/// Measures hits in the first level of `memory.compose(disk)` against direct memory-level gets.
///
/// Scenario `compose-get`. The target: the composed get costs at most 2× the direct one.
enum ComposeGet {
    static let direct = "MemoryCacheLevel.get"
    static let composed = "memory.compose(disk).get, memory hit"

    static func run(_ context: BenchContext) async throws -> ScenarioReport {
        try await withScratchFolders { scratch in try await run(context, scratch) }
    }

    private static func run(_ context: BenchContext, _ scratch: ScratchFolders) async throws -> ScenarioReport {
        let keyCount = context.size(10_000)
        let getCount = context.size(1_000_000)
        let keys = makeKeys(keyCount)
        let indices = uniformIndices(count: getCount, below: keyCount, seed: 0x434F_4D50)
        let expectedSum = indices.reduce(UInt64(0)) { $0 &+ UInt64($1) }
        var report = ScenarioReport(
            name: "compose-get",
            title: "\(grouped(getCount)) async gets over \(grouped(keyCount)) keys, all memory hits, 1 task"
        )
        let directMemory = MemoryCacheLevel<String, Int>(capacity: keyCount, policy: .lru)
        let firstMemory = MemoryCacheLevel<String, Int>(capacity: keyCount, policy: .lru)
        let disk = DiskCacheLevel<String, Int>(directory: try scratch.fresh(), capacity: 10)
        let composedLevel = firstMemory.compose(disk)
        for (value, key) in keys.enumerated() {
            try await directMemory.set(value, forKey: key)
            try await firstMemory.set(value, forKey: key)
        }
        var checksum: UInt64 = 0
        func check(_ label: String, _ sum: UInt64) {
            checksum &+= sum
            if sum != expectedSum { report.notes.append("\(label): wrong sum \(sum), expected \(expectedSum)") }
        }
        report.rows = try await measureInterleaved(
            [
                Contender(label: direct, operations: getCount) {
                    var sum: UInt64 = 0
                    let start = ContinuousClock.now
                    for index in indices { sum &+= UInt64(try await directMemory.get(keys[index])) }
                    let elapsed = ContinuousClock.now - start
                    check(direct, sum)
                    return elapsed
                },
                Contender(label: composed, operations: getCount) {
                    var sum: UInt64 = 0
                    let start = ContinuousClock.now
                    for index in indices { sum &+= UInt64(try await composedLevel.get(keys[index])) }
                    let elapsed = ContinuousClock.now - start
                    check(composed, sum)
                    return elapsed
                },
            ],
            plan: context.plan
        )
        report.reference = direct
        report.comparisons = [(composed, direct)]
        report.summary = [
            ("level get, direct MemoryCacheLevel", direct),
            ("level get, memory.compose(disk) hit", composed),
        ]
        if let top = report.row(composed), let bottom = report.row(direct) {
            report.summaryText.append(
                "compose hit cost vs direct: \(String(format: "%.2f", bottom.median / top.median))× (target ≤ 2×)"
            )
        }
        report.checksum = checksum
        return report
    }
}
