import Foundation
import Hoard

/// Measures `fleetSingleFetch` across processes: origin calls per key and the latency of a miss,
/// with leases on and off.
///
/// Scenario `lease`. Four `hoard-test-worker` processes, 32 callers each, all get the same 1 000 cold
/// keys in the same order at once, with an origin that answers in 50 ms (slow) or 1 ms (fast). Each
/// process reports its origin calls and the time of every call (p50, p99, mean), with leases off, on,
/// and on with `coherence(.invalidations)` (whose invalidations wake the waiters). Then one process
/// with one caller misses 1 000 cold keys one after another (a 1 ms origin): the time leases add to
/// a miss that nobody else shares. The server is the one `HOARD_REDIS_URL` names, else a
/// `redis-server` from the PATH started on a free port for the run. Target: 1.00 origin call per key
/// with leases on (at most 1.05).
enum LeaseBench {
    /// What the processes of one configuration reported together.
    struct Run {
        var fetches = 0
        var calls = 0
        var errors = 0
        /// Each process's p50, p99 and mean call time, in nanoseconds.
        var p50: [Int64] = []
        var p99: [Int64] = []
        var mean: [Int64] = []
        var wall = Duration.zero

        /// The median of `values`, in milliseconds.
        static func milliseconds(_ values: [Int64]) -> String {
            let sorted = values.sorted()
            guard !sorted.isEmpty else { return "–" }
            return String(format: "%.2f ms", Double(sorted[sorted.count / 2]) / 1e6)
        }
    }

    static func run(_ context: BenchContext) async throws -> ScenarioReport {
        var report = ScenarioReport(
            name: "lease",
            title: "fleetSingleFetch: origin calls per key and miss latency, 4 processes × 32 callers, same cold keys"
        )
        guard let worker = BenchWorker.executable else {
            report.notes.append("skipped: hoard-test-worker is not built next to hoard-bench")
            return report
        }
        let server: BenchServer
        do {
            server = try await BenchServer.start()
        } catch {
            report.notes.append("skipped: no Redis server (\(error)); set HOARD_REDIS_URL or install redis-server")
            return report
        }
        defer { server.stop() }
        let keys = context.size(1_000)
        for origin in [50, 1] {
            for leases in ["off", "on", "on-coherent"] {
                let run = try await measure(
                    worker: worker,
                    server: server,
                    processes: 4,
                    callers: 32,
                    keys: keys,
                    originMilliseconds: origin,
                    leases: leases
                )
                let perKey = Double(run.fetches) / Double(keys)
                let label = "origin \(origin) ms, leases \(leases == "on-coherent" ? "on, coherent" : leases)"
                report.lines.append(
                    "\(label): \(String(format: "%.2f", perKey)) origin calls per key; call p50 "
                        + "\(Run.milliseconds(run.p50)), p99 \(Run.milliseconds(run.p99)), mean "
                        + "\(Run.milliseconds(run.mean)) (median over processes); \(run.calls) calls, "
                        + "\(run.errors) errors, \(String(format: "%.2f", run.wall.seconds)) s"
                )
                if leases != "off" {
                    report.targets.append(
                        TargetCheck(
                            target: "\(label): origin calls per key ≤ 1.05",
                            measured: String(format: "%.2f", perKey),
                            holds: perKey <= 1.05
                        )
                    )
                }
            }
        }
        for leases in ["off", "on"] {
            let run = try await measure(
                worker: worker,
                server: server,
                processes: 1,
                callers: 1,
                keys: keys,
                originMilliseconds: 1,
                leases: leases
            )
            report.lines.append(
                "one caller, cold keys one by one, origin 1 ms, leases \(leases): miss p50 "
                    + "\(Run.milliseconds(run.p50)), p99 \(Run.milliseconds(run.p99)), mean "
                    + "\(Run.milliseconds(run.mean))"
            )
        }
        report.summaryText = report.lines
        report.notes.append("server: \(server.url); \(keys) keys per run, a fresh namespace per run")
        return report
    }

    /// Starts `processes` workers on a fresh namespace, lets them go at once, and adds up what they
    /// report.
    static func measure(
        worker: URL,
        server: BenchServer,
        processes: Int,
        callers: Int,
        keys: Int,
        originMilliseconds: Int,
        leases: String
    ) async throws -> Run {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("hoard-bench-lease-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let namespace = "hoard-bench-lease-\(UUID().uuidString)"
        let children = try (0..<processes).map { index in
            try BenchWorker(
                executable: worker,
                [
                    "fleet-lease-bench", folder.path, "child-\(index)", server.url, namespace,
                    String(originMilliseconds), String(callers), leases, String(keys),
                ]
            )
        }
        defer { for child in children { child.finish() } }
        for child in children {
            guard await onPlainThread({ child.readLine() }) == "ready" else {
                throw CoherenceBench.WorkerFailure(description: "a lease worker did not start")
            }
        }
        let started = ContinuousClock.now
        for child in children { child.send("go") }
        var run = Run()
        for child in children {
            guard let line = await onPlainThread({ child.readLine(seconds: 600) }), line.hasPrefix("done ") else {
                throw CoherenceBench.WorkerFailure(description: "a lease worker did not finish")
            }
            let words = line.split(separator: " ").map(String.init)
            func value(_ name: String) -> Int64 {
                guard let index = words.firstIndex(of: name), index + 1 < words.count else { return 0 }
                return Int64(words[index + 1]) ?? 0
            }
            run.fetches += Int(value("fetches"))
            run.calls += Int(value("calls"))
            run.errors += Int(value("errors"))
            run.p50.append(value("p50"))
            run.p99.append(value("p99"))
            run.mean.append(value("mean"))
        }
        run.wall = ContinuousClock.now - started
        return run
    }
}
