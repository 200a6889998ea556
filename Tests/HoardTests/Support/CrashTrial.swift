import Foundation
import HoardTestSupport

@testable import Hoard

/// One crash trial: a worker process with a random setup, killed after a random number of operations.
struct CrashTrial {
    struct Report: Sendable {
        var seed: UInt64
        var setup: String
        var problems: [String]
        var wasKilled: Bool
        var confirmedFlushes: Int
        var confirmedSaves: Int
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
            confirmedFlushes: history.confirmedFlushes,
            confirmedSaves: history.confirmedSaves
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
