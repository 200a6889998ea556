import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Two and four processes hammer one container, most of them killed with `SIGKILL`.
///
/// Random sets, saves, removals, reads, clears and flushes, killed at random moments. Then: no damaged value, no value older
/// than the newest confirmed write of any process, the limits hold after a final flush, and no
/// temporary file of a dead process is left once the container is reopened.
///
/// `HOARD_MULTI_TRIALS` sets the number of trials per process count (6 by default) and
/// `HOARD_MULTI_SEED` the first seed (random by default; a failure prints its seed).
@Suite(.timeLimit(.minutes(30)))
struct MultiProcessCrashTests {
    static let trials = ProcessInfo.processInfo.environment["HOARD_MULTI_TRIALS"].flatMap { Int($0) } ?? 6
    static let firstSeed =
        ProcessInfo.processInfo.environment["HOARD_MULTI_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1..<1 << 40)

    @Test(arguments: [2, 4])
    func killedProcessesSharingAContainerLoseNoConfirmedWriteAndBreakNoLimit(workers: Int) async throws {
        _ = try WorkerProcess.requireExecutable()
        var reports: [SharedCrashTrial.Report] = []
        for trial in 0..<Self.trials {
            let seed = Self.firstSeed &+ UInt64(trial) &+ UInt64(workers) << 32
            reports.append(try await SharedCrashTrial(seed: seed, workers: workers).run())
        }
        for report in reports where !report.problems.isEmpty {
            let problems = report.problems.prefix(10).joined(separator: "\n")
            Issue.record("Trial with HOARD_MULTI_SEED=\(report.seed) (\(report.setup)) failed:\n\(problems)")
        }
        let flushes = reports.map(\.confirmedFlushes).reduce(0, +)
        let saves = reports.map(\.confirmedSaves).reduce(0, +)
        print(
            "Multi-process trials (\(workers) workers): \(reports.count), \(reports.map(\.killed).reduce(0, +)) "
                + "workers killed, \(flushes) confirmed flushes, \(saves) confirmed saves; first seed \(Self.firstSeed)"
        )
        #expect(reports.count == Self.trials)
        #expect(reports.allSatisfy { $0.problems.isEmpty })
        #expect(saves > 0 && flushes > 0, "nothing was confirmed: the trials checked no durable write")
    }

    @Test func theCheckerCatchesAValueOlderThanAnotherProcessesConfirmedWrite() {
        let a = CrashWorkload.value(key: "k0", seq: 1, length: 3)
        let b = CrashWorkload.value(key: "k0", seq: SharedWorkload.seqStride + 1, length: 2)
        let lines = [
            [
                SharedWorkload.line(.set(key: "k0", seq: 1, length: 3), at: 10),
                SharedWorkload.line(.flush(seq: 2), at: 11), SharedWorkload.line(.flushed(seq: 2), at: 12),
            ],
            [
                SharedWorkload.line(.save(key: "k0", seq: SharedWorkload.seqStride + 1, length: 2), at: 20),
                SharedWorkload.line(.saved(key: "k0", seq: SharedWorkload.seqStride + 1), at: 21),
            ],
        ]
        let history = SharedHistory(lines: lines, deaths: [100, 100])
        // The second process's save started after the first one's flush confirmed its set.
        #expect(history.problem(key: "k0", value: a, mayEvict: false) != nil)
        #expect(history.problem(key: "k0", value: b, mayEvict: false) == nil)
        #expect(history.problem(key: "k0", value: nil, mayEvict: false) != nil)
        #expect(history.problem(key: "k0", value: "k0|1|xyz", mayEvict: true) != nil)
        // Overlapping in time, either may win.
        let overlapping = SharedHistory(
            lines: [
                lines[0], [SharedWorkload.line(.set(key: "k0", seq: SharedWorkload.seqStride + 1, length: 2), at: 5)],
            ],
            deaths: [100, 100]
        )
        #expect(overlapping.problem(key: "k0", value: a, mayEvict: false) == nil)
        #expect(overlapping.problem(key: "k0", value: b, mayEvict: false) == nil)
        #expect(overlapping.problem(key: "k0", value: nil, mayEvict: false) != nil)
    }
}
