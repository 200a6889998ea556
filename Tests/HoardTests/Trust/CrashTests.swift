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
        print(
            "Crash trials: \(reports.count) (\(killed) killed, \(reports.count - killed) ran to the end, "
                + "\(flushes) confirmed flushes), failures: \(failed.count); first seed \(Self.firstSeed)"
        )
        #expect(reports.count == Self.trials)
        #expect(failed.isEmpty)
    }

    @Test func theWorkersRecordsAndArgumentsReadBackAsWritten() {
        let records: [CrashWorkload.Record] = [
            .set(key: "k3", seq: 7, length: 120), .remove(key: "k0", seq: 8), .removeAll(seq: 9),
            .clearMemory(seq: 10), .flush(seq: 11), .flushed(seq: 11), .mismatch("read k1: nil instead of k1|2|bb"),
            .end,
        ]
        for record in records { #expect(CrashWorkload.Record(line: record.line) == record) }
        #expect(records.filter(\.startsAnOperation).count == 5)
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

/// What a crash may leave for each key, from the records the killed worker printed.
///
/// A flush that returned (`D`) confirms every operation before it started (`F`): after the crash,
/// a key holds what its last operation before that flush left, or what any later operation on it
/// left (it may have landed). A removal, a clear and no operation at all leave a miss; with fewer
/// disk slots than keys a miss is always possible (an eviction).
struct CrashHistory {
    enum Outcome: Hashable, CustomStringConvertible {
        case miss
        case value(seq: Int, length: Int)

        var description: String {
            switch self {
            case .miss: "a miss"
            case .value(let seq, _): "set #\(seq)"
            }
        }
    }

    /// The outcomes each key may show, by key.
    private(set) var allowed: [String: Set<Outcome>] = [:]
    private(set) var confirmedFlushes = 0
    private(set) var failures: [String] = []
    private(set) var hasEnded = false
    private(set) var operationCount = 0

    /// Reads the worker's records (`CrashWorkload.Record` lines) for a workload on `keyCount` keys.
    init(records: [String], keyCount: Int) {
        let keys = (0..<keyCount).map(CrashWorkload.key)
        var operations: [String: [(position: Int, outcome: Outcome)]] = [:]
        var flushStarts: [Int: Int] = [:]
        var confirmedUpTo = -1
        for (position, line) in records.enumerated() {
            switch CrashWorkload.Record(line: line) {
            case .set(let key, let seq, let length):
                operations[key, default: []].append((position, .value(seq: seq, length: length)))
                operationCount += 1
            case .remove(let key, _):
                operations[key, default: []].append((position, .miss))
                operationCount += 1
            case .removeAll:
                for key in keys { operations[key, default: []].append((position, .miss)) }
                operationCount += 1
            case .clearMemory:
                operationCount += 1
            case .flush(let seq):
                flushStarts[seq] = position
                operationCount += 1
            case .flushed(let seq):
                guard let start = flushStarts[seq] else {
                    failures.append("worker: \(line)")
                    continue
                }
                confirmedUpTo = start
                confirmedFlushes += 1
            case .end:
                hasEnded = true
            case .mismatch, nil:
                failures.append("worker: \(line)")
            }
        }
        for key in keys {
            let history = operations[key] ?? []
            var outcomes: Set<Outcome> = [history.last { $0.position < confirmedUpTo }?.outcome ?? .miss]
            for operation in history where operation.position > confirmedUpTo { outcomes.insert(operation.outcome) }
            allowed[key] = outcomes
        }
    }

    private static func describe(_ outcomes: Set<Outcome>) -> String {
        outcomes.map(\.description).sorted().joined(separator: ", ")
    }

    /// Why `value` is not something `key` may hold after the crash, or `nil` when it may.
    func problem(key: String, value: String?, mayEvict: Bool) -> String? {
        let allowed = allowed[key] ?? [.miss]
        guard let value else {
            return allowed.contains(.miss) || mayEvict
                ? nil : "\(key) is missing; it may only hold \(Self.describe(allowed))"
        }
        let fields = value.split(separator: "|", maxSplits: 2, omittingEmptySubsequences: false)
        guard fields.count == 3, fields[0] == key, let seq = Int(fields[1]) else {
            return "\(key) holds a value that is not its own: \(value.prefix(60))"
        }
        let outcome = Outcome.value(seq: seq, length: fields[2].count)
        guard CrashWorkload.value(key: key, seq: seq, length: fields[2].count) == value else {
            return "\(key) holds garbage: \(value.prefix(60))"
        }
        guard allowed.contains(outcome) else {
            return "\(key) holds set #\(seq), which was never set or was superseded by a confirmed flush; "
                + "it may only hold \(Self.describe(allowed))"
        }
        return nil
    }
}

/// One crash trial: a worker process with a random setup, killed after a random number of operations.
struct CrashTrial {
    struct Report: Sendable {
        var seed: UInt64
        var setup: String
        var problems: [String]
        var wasKilled: Bool
        var confirmedFlushes: Int
    }

    let seed: UInt64
    let operations: Int
    let killAfter: Int
    let maxDiskCount: Int
    let maxRamCount: Int
    let policy: EvictionPolicy

    init(seed: UInt64) {
        self.seed = seed
        var generator = SplitMix64(seed: seed)
        operations = 20 + Int(generator.next() % 1_500)
        // Reads print no record, so about 82 % of the operations count here: one trial in ten or so
        // runs to its end, the others die after a random operation.
        killAfter = 1 + Int(generator.next() % UInt64(operations * 9 / 10))
        maxDiskCount = [CrashWorkload.keyCount, 40, 12, 5][Int(generator.next() % 4)]
        maxRamCount = [1, 4, 16][Int(generator.next() % 3)]
        policy = generator.next() % 2 == 0 ? .lfu : .lru
    }

    var setup: String {
        "\(operations) operations, killed after \(killAfter), maxDiskCount \(maxDiskCount), "
            + "maxRamCount \(maxRamCount), \(policy)"
    }

    func run() async throws -> Report {
        let folder = TemporaryDirectory()
        let workload = CrashWorkload.Setup(
            folder: folder.url.path,
            container: "test",
            seed: seed,
            operations: operations,
            maxDiskCount: maxDiskCount,
            maxRamCount: maxRamCount,
            policy: policy
        )
        let process = try WorkerProcess(["crash"] + workload.arguments)
        process.closeInput()
        let killAfter = killAfter
        let (records, ending) = await onPlainThread { () -> ([String], WorkerProcess.Ending) in
            var records: [String] = []
            var started = 0
            while let line = process.readLine() {
                records.append(line)
                if CrashWorkload.Record(line: line)?.startsAnOperation == true {
                    started += 1
                    if started == killAfter { process.kill() }
                }
            }
            return (records, process.wait())
        }
        let history = CrashHistory(records: records, keyCount: CrashWorkload.keyCount)
        var problems = history.failures
        let wasKilled = ending == .killed(SIGKILL)
        if !(wasKilled || (ending == .exited(0) && history.hasEnded)) {
            problems.append("the worker \(ending) after \(records.count) records")
        }
        problems += try check(folder, history, mayEvict: workload.mayEvict)
        return Report(
            seed: seed,
            setup: setup,
            problems: problems,
            wasKilled: wasKilled,
            confirmedFlushes: history.confirmedFlushes
        )
    }

    private func check(_ folder: TemporaryDirectory, _ history: CrashHistory, mayEvict: Bool) throws -> [String] {
        var problems: [String] = []
        let container = folder.container()

        // Before reopening: the files as the crash left them. Writes are renamed into place, so no
        // entry file may be torn, and each must hold its own key and a value that key may hold.
        for name in folder.entryFiles() {
            let bytes = try [UInt8](Data(contentsOf: container.appendingPathComponent(name)))
            guard let entry = try? EntryFormat.decode(bytes) else {
                problems.append("the entry file \(name) is damaged")
                continue
            }
            if DiskKey(entry.key).fileName != name { problems.append("the file \(name) holds key \(entry.key)") }
            if let problem = history.problem(
                key: entry.key,
                value: String(decoding: entry.payload, as: UTF8.self),
                mayEvict: mayEvict
            ) {
                problems.append("on disk: \(problem)")
            }
        }

        // Reopened, as the next run of the app would.
        let cache = try folder.stringBuilder()
            .maxRamCount(16)
            .maxDiskCount(maxDiskCount)
            .evictionPolicy(policy)
            .build()
        let names = (try? FileManager.default.contentsOfDirectory(atPath: container.path)) ?? []
        let temporary = names.filter { $0.hasPrefix(ContainerFile.temporaryPrefix) }
        if !temporary.isEmpty { problems.append("temporary files left after reopening: \(temporary)") }
        let files = folder.entryFiles()
        if cache.diskCount != files.count {
            problems.append("diskCount is \(cache.diskCount) with \(files.count) entry files")
        }
        let fileKeys = Set(
            files.compactMap { name in
                (try? Data(contentsOf: container.appendingPathComponent(name)))
                    .flatMap { try? EntryFormat.decode([UInt8]($0)) }?.key
            }
        )
        if Set(cache.allKeys) != fileKeys {
            problems.append("allKeys \(cache.allKeys.sorted()) differ from the files' keys \(fileKeys.sorted())")
        }
        for key in CrashWorkload.keys {
            let value = cache[key]
            if let problem = history.problem(key: key, value: value, mayEvict: mayEvict) { problems.append(problem) }
            if (value != nil) != fileKeys.contains(key) {
                problems.append(
                    "\(key) reads \(value == nil ? "a miss" : "a value") but its file is \(fileKeys.contains(key) ? "there" : "gone")"
                )
            }
        }
        return problems
    }
}
