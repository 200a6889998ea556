import Foundation
import HoardTestSupport

@testable import Hoard

/// One multi-process crash trial: several workers run random workloads on one container at once,
/// some are killed at random moments, then the container is checked.
struct SharedCrashTrial {
    struct Report: Sendable {
        var seed: UInt64
        var setup: String
        var problems: [String]
        var killed: Int
        var confirmedFlushes: Int
        var confirmedSaves: Int
    }

    let seed: UInt64
    let workers: Int
    let operations: [Int]
    /// After how many started operations each worker is killed; `nil` to let it run to its end.
    let killAfter: [Int?]
    let maxDiskCount: Int
    let policy: EvictionPolicy
    /// Every worker's `maxDiskBytes`, if any: the byte budget holds for the container as a whole.
    let maxDiskBytes: Int?

    init(seed: UInt64, workers: Int) {
        self.seed = seed
        self.workers = workers
        var generator = SplitMix64(seed: seed)
        var operations: [Int] = []
        var killAfter: [Int?] = []
        for _ in 0..<workers {
            let count = 50 + Int(generator.next() % 800)
            operations.append(count)
            killAfter.append(generator.next() % 4 == 0 ? nil : 1 + Int(generator.next() % UInt64(count * 8 / 10)))
        }
        self.operations = operations
        self.killAfter = killAfter
        maxDiskCount = [CrashWorkload.keyCount, 40, 12, 5][Int(generator.next() % 4)]
        policy = [.lfu, .lru, .wTinyLFU][Int(generator.next() % 3)]
        // Drawn apart, so that each seed keeps the rest of the setup it had before byte limits.
        var budget = SplitMix64(seed: seed ^ 0xb17e)
        maxDiskBytes = [nil, nil, 12 << 10, 32 << 10][Int(budget.next() % 4)]
    }

    var setup: String {
        "\(workers) workers, operations \(operations), killed after \(killAfter.map { $0.map(String.init) ?? "-" }), "
            + "maxDiskCount \(maxDiskCount), maxDiskBytes \(maxDiskBytes.map(String.init) ?? "-"), \(policy)"
    }

    private var mayEvict: Bool { maxDiskCount < CrashWorkload.keyCount || maxDiskBytes != nil }

    func run() async throws -> Report {
        let folder = TemporaryDirectory()
        var generator = SplitMix64(seed: seed ^ 0x5eed)
        let processes = try (0..<workers).map { worker in
            let setup = CrashWorkload.Setup(
                folder: folder.url.path,
                container: "test",
                seed: generator.next(),
                operations: operations[worker],
                maxDiskCount: maxDiskCount,
                maxRamCount: [1, 4, 16][Int(generator.next() % 3)],
                policy: policy,
                maxDiskBytes: maxDiskBytes
            )
            let process = try WorkerProcess(["shared", "\(worker)"] + setup.arguments)
            process.closeInput()
            return process
        }
        let results = await withTaskGroup(of: (Int, [String], WorkerProcess.Ending, UInt64).self) { group in
            for (worker, process) in processes.enumerated() {
                let killAfter = killAfter[worker]
                group.addTask {
                    await onPlainThread {
                        var lines: [String] = []
                        var started = 0
                        while let line = process.readLine() {
                            lines.append(line)
                            if SharedWorkload.parse(line)?.record.startsAnOperation == true {
                                started += 1
                                if started == killAfter { process.kill() }
                            }
                        }
                        let ending = process.wait()
                        return (worker, lines, ending, SharedWorkload.now())
                    }
                }
            }
            var results: [(Int, [String], WorkerProcess.Ending, UInt64)] = []
            for await result in group { results.append(result) }
            return results.sorted { $0.0 < $1.0 }
        }
        var problems: [String] = []
        for (worker, lines, ending, _) in results
        where
            !(ending == .killed(SIGKILL)
            || (ending == .exited(0) && lines.last.flatMap(SharedWorkload.parse)?.record == .end))
        {
            problems.append("worker \(worker) \(ending) after \(lines.count) lines: \(lines.suffix(2))")
        }
        let history = SharedHistory(lines: results.map(\.1), deaths: results.map(\.3))
        problems += history.failures
        problems += try await check(folder, history)
        return Report(
            seed: seed,
            setup: setup,
            problems: problems,
            killed: results.filter { $0.2 == .killed(SIGKILL) }.count,
            confirmedFlushes: history.confirmedFlushes,
            confirmedSaves: history.confirmedSaves
        )
    }

    private func check(_ folder: TemporaryDirectory, _ history: SharedHistory) async throws -> [String] {
        var problems: [String] = []
        let container = folder.container()
        // The files as the processes left them: none torn, each its own key's, none too old.
        for name in folder.entryFiles() {
            let bytes = try [UInt8](Data(contentsOf: container.appendingPathComponent(name)))
            guard let entry = try? EntryFormat.decode(bytes) else {
                problems.append("the entry file \(name) is damaged")
                continue
            }
            if DiskKey(entry.key).fileName != name { problems.append("the file \(name) holds key \(entry.key)") }
            let value = String(decoding: entry.payload, as: UTF8.self)
            if let problem = history.problem(key: entry.key, value: value, mayEvict: mayEvict) {
                problems.append("on disk: \(problem)")
            }
        }
        // Reopened, and flushed: the limits hold, and no dead process's temporary file is left.
        var builder = folder.stringBuilder().maxRamCount(0).maxDiskCount(maxDiskCount).evictionPolicy(policy)
        if let maxDiskBytes { builder = builder.maxDiskBytes(maxDiskBytes) }
        let cache = try builder.build(sharingStore: false)
        await cache.flush()
        let names = (try? FileManager.default.contentsOfDirectory(atPath: container.path)) ?? []
        let temporary = names.filter { $0.hasPrefix(ContainerFile.temporaryPrefix) }
        if !temporary.isEmpty { problems.append("temporary files left after reopening: \(temporary)") }
        let files = folder.entryFiles()
        if files.count > maxDiskCount { problems.append("\(files.count) entry files > maxDiskCount \(maxDiskCount)") }
        if let maxDiskBytes {
            let bytes = names.compactMap { name in
                try? FileManager.default.attributesOfItem(atPath: container.appendingPathComponent(name).path)[.size]
                    as? Int
            }
            if bytes.reduce(0, +) > maxDiskBytes {
                problems.append("the container's files take \(bytes.reduce(0, +)) bytes > maxDiskBytes \(maxDiskBytes)")
            }
        }
        if cache.diskCount != files.count {
            problems.append("diskCount is \(cache.diskCount) with \(files.count) entry files")
        }
        for key in CrashWorkload.keys {
            let value = cache[key]
            if let problem = history.problem(key: key, value: value, mayEvict: mayEvict) { problems.append(problem) }
            if (value != nil) != files.contains(DiskKey(key).fileName) {
                problems.append("\(key) reads \(value == nil ? "a miss" : "a value") but its file disagrees")
            }
        }
        problems += cache.disk?.invariantViolations() ?? []
        return problems
    }
}
