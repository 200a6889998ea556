import Foundation
import Hoard
import HoardTestSupport

extension CoherenceBench {
    /// What the two-process rounds measured.
    struct CrossProcessRun {
        /// (child dropped the key) − (A's save returned), 0 when the child dropped it first, sorted.
        var latencies: [UInt64] = []
        /// Rounds whose child was seen holding the old value after the save returned.
        var seenStale = 0
        /// Rounds whose child had not yet been seen without the old value when the save returned.
        var maybeStale = 0
        /// Reads the child made after the drop that still answered the old value.
        var staleReads = 0
        /// Rounds skipped because the child could not be made to hold the old value.
        var skipped = 0
    }

    /// A worker line that did not come, or not the one expected.
    struct WorkerFailure: Error, CustomStringConvertible {
        let description: String
    }

    /// Measures, across processes, how soon another instance drops a key that `writer` saved.
    ///
    /// `rounds` times: the child (another process) holds a key's old value in memory, this process's
    /// coherent `writer` saves a new one, and the child reports, on `CLOCK_MONOTONIC`, when its memory
    /// dropped the old value and the last time it still saw it. The child reads `writer`'s
    /// `namespace`.
    ///
    /// - Throws: ``WorkerFailure`` when the worker stops answering or answers something else; what
    ///   the writer's `save` throws.
    static func measureCrossProcess(
        worker: URL,
        server: BenchServer,
        namespace: String,
        writer: Cache<String>,
        rounds: Int
    ) async throws -> CrossProcessRun {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("hoard-bench-fleet-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let child = try BenchWorker(executable: worker, ["fleet-watch", folder.path, "child", server.url, namespace])
        defer { child.finish() }
        func expect(_ prefix: String) async throws -> String {
            let line = await onPlainThread { child.readLine() }
            guard let line, line.hasPrefix(prefix) else {
                throw WorkerFailure(description: "the worker answered \(line ?? "nothing") where \(prefix)… was due")
            }
            return line
        }
        _ = try await expect("ready")
        var run = CrossProcessRun()
        run.latencies.reserveCapacity(rounds)
        for round in 0..<rounds {
            let key = "cross-\(round % 100)"
            let (old, new) = ("old-\(round)", "new-\(round)")
            try await writer.save(old, forKey: key)
            // A read that the save's own invalidation reached is not installed, and is made again.
            var installed = false
            for _ in 0..<100 where !installed {
                child.send("get \(key)")
                installed = try await expect("value \(key)=").hasSuffix("=\(old) memory")
            }
            guard installed else {
                run.skipped += 1
                continue
            }
            child.send("spin \(key) \(old)")
            _ = try await expect("watching \(key)")
            try await writer.save(new, forKey: key)
            let saved = monotonicNanoseconds()
            let words = try await expect("dropped \(key) ").split(separator: " ")
            guard words.count == 5, let dropped = UInt64(words[2]), let held = UInt64(words[4]) else {
                throw WorkerFailure(description: "a dropped line without its times: \(words.joined(separator: " "))")
            }
            run.latencies.append(dropped > saved ? dropped - saved : 0)
            if held > saved { run.seenStale += 1 }
            if dropped > saved { run.maybeStale += 1 }
            child.send("get \(key)")
            if try await expect("value \(key)=").hasPrefix("value \(key)=\(old) ") { run.staleReads += 1 }
        }
        run.latencies.sort()
        return run
    }
}
