import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Kills a process at a random moment of a random workload, reopens its container, and checks that
/// the crash lost nothing a flush had confirmed and left nothing that was never written.
///
/// `HOARD_CRASH_TRIALS` sets the number of trials (20 by default; `.ci/run` runs 200) and
/// `HOARD_CRASH_SEED` the first trial's seed (random by default; a failure prints its seed).
@Suite(.timeLimit(.minutes(30)))
struct CrashTests {
    static let trials = ProcessInfo.processInfo.environment["HOARD_CRASH_TRIALS"].flatMap { Int($0) } ?? 20
    static let firstSeed =
        ProcessInfo.processInfo.environment["HOARD_CRASH_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1..<1 << 40)

    @Test func aKilledProcessLeavesOnlyWrittenValuesAndKeepsWhatItFlushed() async throws {
        _ = try WorkerProcess.requireExecutable()
        var reports: [CrashTrial.Report] = []
        // Two trials at a time: one per core.
        try await withThrowingTaskGroup(of: CrashTrial.Report.self) { group in
            var next = 0
            func startTrial() {
                let seed = Self.firstSeed &+ UInt64(next)
                next += 1
                group.addTask { try await CrashTrial(seed: seed).run() }
            }
            while next < min(2, Self.trials) { startTrial() }
            while let report = try await group.next() {
                reports.append(report)
                if next < Self.trials { startTrial() }
            }
        }
        let failed = reports.filter { !$0.problems.isEmpty }
        for report in failed.sorted(by: { $0.seed < $1.seed }) {
            let problems = report.problems.prefix(10).joined(separator: "\n")
            Issue.record("Crash trial with HOARD_CRASH_SEED=\(report.seed) (\(report.setup)) failed:\n\(problems)")
        }
        let killed = reports.filter(\.wasKilled).count
        let flushes = reports.map(\.confirmedFlushes).reduce(0, +)
        let saves = reports.map(\.confirmedSaves).reduce(0, +)
        print(
            "Crash trials: \(reports.count) (\(killed) killed, \(reports.count - killed) ran to the end, "
                + "\(flushes) confirmed flushes, \(saves) confirmed saves), failures: \(failed.count); "
                + "first seed \(Self.firstSeed)"
        )
        #expect(reports.count == Self.trials)
        #expect(failed.isEmpty)
        #expect(saves > 0, "no save returned before a kill: the trials checked no durable save")
    }

    @Test func theWorkersRecordsAndArgumentsReadBackAsWritten() {
        let records: [CrashWorkload.Record] = [
            .set(key: "k3", seq: 7, length: 120), .remove(key: "k0", seq: 8), .removeAll(seq: 9),
            .clearMemory(seq: 10), .flush(seq: 11), .flushed(seq: 11), .mismatch("read k1: nil instead of k1|2|bb"),
            .save(key: "k2", seq: 12, length: 8), .saved(key: "k2", seq: 12), .end,
        ]
        for record in records { #expect(CrashWorkload.Record(line: record.line) == record) }
        #expect(records.filter(\.startsAnOperation).count == 6)
        #expect(CrashWorkload.Record(line: "S k1 1") == nil)  // cut short by a kill
        #expect(CrashWorkload.Record(line: "S k1 one 5") == nil)
        for policy in EvictionPolicy.allCases {
            let setup = CrashWorkload.Setup(
                folder: "/tmp/a folder",
                container: "test",
                seed: 1 << 40,
                operations: 300,
                maxDiskCount: 5,
                maxRamCount: 16,
                policy: policy
            )
            #expect(CrashWorkload.Setup(arguments: setup.arguments) == setup)
            var limited = setup
            limited.maxDiskBytes = 12 << 10
            #expect(CrashWorkload.Setup(arguments: limited.arguments) == limited)
        }
    }

    @Test func theCheckerCatchesALostFlushAndAForeignValue() throws {
        // The checker must be able to fail: a flushed value gone, an unflushed older value back, a
        // value of another key.
        let records = ["S k1 1 5", "F 2", "D 2", "S k2 3 4", "F 4", "D 4", "S k1 5 2"]
        let history = CrashHistory(records: records, keyCount: 24)
        #expect(history.problem(key: "k1", value: nil, mayEvict: false) != nil)
        #expect(
            history.problem(key: "k1", value: CrashWorkload.value(key: "k1", seq: 1, length: 5), mayEvict: false) == nil
        )
        #expect(
            history.problem(key: "k1", value: CrashWorkload.value(key: "k1", seq: 5, length: 2), mayEvict: false) == nil
        )
        #expect(history.problem(key: "k2", value: nil, mayEvict: false) != nil)
        #expect(history.problem(key: "k2", value: nil, mayEvict: true) == nil)
        #expect(
            history.problem(key: "k2", value: CrashWorkload.value(key: "k1", seq: 1, length: 5), mayEvict: true) != nil
        )
        #expect(history.problem(key: "k2", value: "k2|3|dddd", mayEvict: false) == nil)
        #expect(history.problem(key: "k2", value: "k2|3|ddd", mayEvict: false) != nil)
        #expect(history.problem(key: "k3", value: nil, mayEvict: false) == nil)
        let removed = CrashHistory(records: ["S k1 1 5", "F 2", "D 2", "R k1 3", "F 4", "D 4"], keyCount: 24)
        #expect(
            removed.problem(key: "k1", value: CrashWorkload.value(key: "k1", seq: 1, length: 5), mayEvict: true) != nil
        )
        let cleared = CrashHistory(records: ["S k1 1 5", "F 2", "D 2", "C 3"], keyCount: 24)
        #expect(cleared.problem(key: "k1", value: nil, mayEvict: false) == nil)
        #expect(
            cleared.problem(key: "k1", value: CrashWorkload.value(key: "k1", seq: 1, length: 5), mayEvict: false) == nil
        )
    }
}

/// What the crash verifier allows once a save returned.
@Suite struct CrashHistoryTests {
    @Test func aSaveThatReturnedMustSurviveUnlessALaterOperationReplacedIt() {
        let confirmed = CrashHistory(records: ["S k0 1 4", "V k0 2 8", "W k0 2", "S k1 3 4"], keyCount: 2)
        #expect(confirmed.allowed["k0"] == [.value(seq: 2, length: 8)])
        #expect(confirmed.allowed["k1"] == [.miss, .value(seq: 3, length: 4)])
        #expect(confirmed.confirmedSaves == 1)
        let overtaken = CrashHistory(records: ["V k0 1 8", "W k0 1", "R k0 2"], keyCount: 1)
        #expect(overtaken.allowed["k0"] == [.value(seq: 1, length: 8), .miss])
        let unconfirmed = CrashHistory(records: ["V k0 1 8"], keyCount: 1)
        #expect(unconfirmed.allowed["k0"] == [.miss, .value(seq: 1, length: 8)])
    }
}
