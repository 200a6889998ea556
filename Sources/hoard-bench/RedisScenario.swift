import Foundation
import Hoard
import HoardRedis

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#endif

/// Measures the Redis level against the server's own benchmark, `redis-benchmark`, in the same run.
///
/// `GET` and `SET` of 1 KiB values at 16 and 64 requests in flight (redis-benchmark: that many
/// connections, no pipelining; Hoard: that many concurrent callers on the default pool).
/// Then a memory hit of a cache in front of the shared level against a shared-level hit.
///
/// Scenario `redis`. The server is the one `HOARD_REDIS_URL` names, else a `redis-server` from the
/// PATH started on a free port for the run. Targets: Hoard ≥ 0.7× redis-benchmark's requests/s, and
/// a memory hit ≥ 100× a shared-level hit. `HOARD_BENCH_REDIS_POOL_SIZES` (say `1,2,4`) measures
/// levels with those pool sizes side by side, in the same run, against the same redis-benchmark
/// figures.
enum RedisBench {
    static func run(_ context: BenchContext) async throws -> ScenarioReport {
        var report = ScenarioReport(
            name: "redis",
            title: "GET/SET of 1 KiB values: Hoard's RedisCacheLevel vs redis-benchmark, same server, same run"
        )
        guard let benchmark = onPath("redis-benchmark") else {
            report.notes.append("skipped: redis-benchmark is not on the PATH")
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
        let requests = context.size(100_000)
        let value = Data((0..<1024).map { UInt8(truncatingIfNeeded: $0) })
        let level = try RedisCacheLevel(url: server.url, namespace: "hoard-bench")
        try await level.set(value, forKey: "warm")
        let pools = try poolSizes().map { size in
            var configuration = try RedisCacheLevel.Configuration(url: server.url)
            configuration.poolSize = size
            return (label: "Hoard, pool \(size)", level: try RedisCacheLevel(configuration, namespace: "hoard-bench"))
        }
        for concurrency in [16, 64] {
            let external = try redisBenchmark(benchmark, server, requests: requests, clients: concurrency)
            for command in ["SET", "GET"] {
                let theirs = Measurement(
                    label: "redis-benchmark \(command) -c \(concurrency)",
                    operations: requests,
                    durations: [.seconds(Double(requests) / max(1, external[command] ?? 0))]
                )
                for (label, candidate) in [(label: "Hoard", level: level)] + pools {
                    let ours = try await measureLevel(
                        candidate,
                        command,
                        value,
                        requests: requests,
                        callers: concurrency,
                        label: label
                    )
                    report.rows.append(ours)
                    report.comparisons.append((ours.label, theirs.label))
                    report.targets.append(
                        .ratio(
                            "\(label) \(command) at \(concurrency) in flight ≥ 0.7× redis-benchmark",
                            ours,
                            theirs,
                            atLeast: 0.7
                        )
                    )
                }
                report.rows.append(theirs)
            }
        }
        let (memory, shared) = try await measureHits(level, value, context)
        report.rows += [memory, shared]
        report.comparisons.append((memory.label, shared.label))
        report.targets.append(
            .ratio("memory hit in front of the shared level ≥ 100× a shared hit", memory, shared, atLeast: 100)
        )
        report.summary = report.rows.map { ($0.label, $0.label) }
        report.notes.append("server: \(server.url); redis-benchmark -t get,set -d 1024 -n \(requests) -c 16|64 -P 1")
        await level.clear()
        return report
    }

    /// The pool sizes `HOARD_BENCH_REDIS_POOL_SIZES` lists, none when it is not set.
    private static func poolSizes() throws -> [Int] {
        guard let text = ProcessInfo.processInfo.environment["HOARD_BENCH_REDIS_POOL_SIZES"], !text.isEmpty else {
            return []
        }
        return try text.split(separator: ",").map { field in
            guard let size = Int(field.trimmingCharacters(in: .whitespaces)), size > 0 else {
                throw BenchError("HOARD_BENCH_REDIS_POOL_SIZES: \"\(field)\" is not a pool size")
            }
            return size
        }
    }

    /// `callers` tasks, each sending its share of `requests` one after another.
    ///
    /// Each caller uses one key of its own (`key:<caller>`), or, given `keys`, request n uses
    /// `keys[n % keys.count]`: on a cluster, keys spread over the slots and so over every primary.
    static func measureLevel(
        _ level: RedisCacheLevel,
        _ command: String,
        _ value: Data,
        requests: Int,
        callers: Int,
        label: String = "Hoard",
        keys: [String]? = nil
    ) async throws -> Measurement {
        let each = requests / callers
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for caller in 0..<callers {
                group.addTask {
                    let own = "key:\(caller)"
                    for request in 0..<each {
                        let key = keys.map { $0[(caller + request * callers) % $0.count] } ?? own
                        if command == "SET" {
                            try await level.set(value, forKey: key)
                        } else {
                            _ = try? await level.get(key)
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let elapsed = ContinuousClock.now - start
        return Measurement(
            label: "\(label) \(command), \(callers) callers",
            operations: each * callers,
            durations: [elapsed]
        )
    }

    /// A memory hit (`cache[key]`) of a cache built over the level, against the level's own `get`.
    private static func measureHits(
        _ level: RedisCacheLevel,
        _ value: Data,
        _ context: BenchContext
    ) async throws -> (Measurement, Measurement) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("hoard-bench-\(UUID())")
        defer { try? FileManager.default.removeItem(at: folder) }
        let cache = try CacheBuilder<Data>(serializer: DataSerializer())
            .containerName("redis")
            .directory(folder)
            .sharedLevel(level)
            .build()
        cache["hot"] = value
        await cache.flush()
        let memoryHits = context.size(1_000_000)
        var bytes = 0
        let memoryTime = time {
            for _ in 0..<memoryHits { bytes &+= cache["hot"]?.count ?? 0 }
        }
        let sharedHits = context.size(20_000)
        let start = ContinuousClock.now
        for _ in 0..<sharedHits { bytes &+= try await level.get("warm").count }
        let sharedTime = ContinuousClock.now - start
        if bytes == 0 { progress("redis: no hit at all") }
        return (
            Measurement(
                label: "memory hit in front of the shared level",
                operations: memoryHits,
                durations: [memoryTime]
            ),
            Measurement(label: "shared-level hit (GET, 1 caller)", operations: sharedHits, durations: [sharedTime])
        )
    }

    /// Runs redis-benchmark and returns its requests/s by command.
    ///
    /// How it reaches the server is `connection`; `-h 127.0.0.1 -p <port>` without one.
    static func redisBenchmark(
        _ executable: URL,
        _ server: BenchServer,
        requests: Int,
        clients: Int,
        connection: [String]? = nil
    ) throws -> [String: Double] {
        let process = Process()
        process.executableURL = executable
        process.arguments =
            (connection ?? ["-h", "127.0.0.1", "-p", String(server.port)]) + [
                "-t", "get,set", "-d", "1024", "-n", String(requests), "-c", String(clients), "-P", "1", "--csv",
            ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        var rates: [String: Double] = [:]
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            let fields = line.split(separator: ",").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }
            if fields.count >= 2, let rate = Double(fields[1]) { rates[fields[0]] = rate }
        }
        return rates
    }

    static func onPath(_ name: String) -> URL? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/usr/local/bin"
        for folder in path.split(separator: ":") {
            let candidate = URL(fileURLWithPath: String(folder)).appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        return nil
    }
}
