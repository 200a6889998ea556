import Foundation
import Hoard
import HoardRedis

/// Measures the Redis level on a Redis Cluster against `redis-benchmark --cluster`, on clusters of
/// 1, 2 and 3 primaries started for the run.
///
/// Each cluster is fresh (no replicas, the slots split evenly; see ``BenchCluster``) and stopped
/// after its turn; all start together, so that their start-up waits overlap, and those not yet
/// measured idle meanwhile (a few cluster-bus pings a second). On each, `GET` and `SET` of 1 KiB
/// values at 16 and 64 requests in flight: Hoard with that many concurrent callers on the cluster
/// level (2 connections per primary, the default) over 10 000 keys spread over the slots;
/// `redis-benchmark --cluster` with that many connections spread over the primaries, no
/// pipelining. `redis-benchmark` refuses `--cluster` on one node, so on 1 primary it runs without it
/// (the node owns every slot). After a warm-up of Hoard at a tenth of the size, the measured rounds
/// interleave the two, so that the drift of a shared machine reaches both alike.
///
/// Scenario `redis-cluster`. Targets: Hoard ≥ 0.7× `redis-benchmark`'s requests/s at every size
/// and concurrency. Reported without a target: Hoard's throughput on 3 primaries over its
/// throughput on 1 (on a machine with fewer cores than primaries, it need not grow).
enum RedisClusterBench {
    static let primaryCounts = [1, 2, 3]
    static let concurrencies = [16, 64]
    static let commands = ["SET", "GET"]

    static func run(_ context: BenchContext) async throws -> ScenarioReport {
        var report = ScenarioReport(
            name: "redis-cluster",
            title:
                "GET/SET of 1 KiB on clusters of 1, 2, 3 primaries: Hoard's cluster level vs redis-benchmark --cluster"
        )
        guard let benchmark = RedisBench.onPath("redis-benchmark"), let redisCLI = RedisBench.onPath("redis-cli"),
            RedisBench.onPath("redis-server") != nil
        else {
            report.notes.append("skipped: redis-server, redis-cli or redis-benchmark is not on the PATH")
            return report
        }
        // Hoard's requests per row (redis-benchmark --cluster's are twice as many; see below).
        // --quick is CI's smoke run of every scenario, in a debug build: a few seconds.
        let requests = context.quick ? 2_000 : 200_000
        let value = Data((0..<1024).map { UInt8(truncatingIfNeeded: $0) })
        let keys = makeKeys(10_000)
        // All at once: a new cluster waits seconds before it serves.
        var clusters: [BenchCluster] = []
        defer { for cluster in clusters { cluster.stop() } }
        do {
            for primaries in primaryCounts {
                clusters.append(try await BenchCluster.launch(primaries: primaries, redisCLI: redisCLI))
                try clusters[clusters.count - 1].join()
            }
            for cluster in clusters { try await cluster.waitUntilOK() }
        } catch {
            report.notes.append("skipped: no cluster (\(error))")
            return report
        }
        for (primaries, cluster) in zip(primaryCounts, clusters) {
            defer { cluster.stop() }
            progress("  \(counted(primaries)): \(cluster.urls.joined(separator: " "))")
            let (rows, notes) = try await measure(
                cluster,
                benchmark,
                requests: requests,
                value: value,
                keys: keys,
                plan: context.plan
            )
            report.rows += rows
            report.notes += notes
        }
        compare(&report)
        report.notes += [
            "redis-benchmark --cluster -h 127.0.0.1 -p <first node> -t get,set -d 1024 -n \(2 * requests) -c 16|64 "
                + "-P 1 --csv (on 1 primary: without --cluster, which refuses one node, and -n \(requests)); Hoard: "
                + "RedisCacheLevel(cluster:namespace:), a pool of 2 per primary (the cluster default), \(grouped(requests)) requests per "
                + "run over keys key-0 … key-9999; \(context.plan.runs) measured rounds, after a warm-up of Hoard at "
                + "\(grouped(requests / 10)) requests",
            "redis-benchmark --cluster gives each primary one key, hash-tagged to a slot it owns, and never "
                + "computes a slot; Hoard computes the CRC16 slot of each key and routes it",
            tickNote(report.rows),
        ]
        return report
    }

    /// The rows of one cluster: for each concurrency and command, Hoard's and redis-benchmark's.
    private static func measure(
        _ cluster: BenchCluster,
        _ benchmark: URL,
        requests: Int,
        value: Data,
        keys: [String],
        plan: RunPlan
    ) async throws -> (rows: [Measurement], notes: [String]) {
        let primaries = cluster.nodes.count
        let level = try RedisCacheLevel(cluster: cluster.urls, namespace: "hoard-bench")
        // Opens the pools and learns the slot map.
        for concurrency in concurrencies {
            for command in commands {
                _ = try await RedisBench.measureLevel(
                    level,
                    command,
                    value,
                    requests: requests / 10,
                    callers: concurrency,
                    keys: keys
                )
            }
        }
        let node = ["-h", "127.0.0.1", "-p", String(cluster.nodes[0].port)]
        // Twice as long with --cluster, so that its 250 ms tick (see `tickNote`) weighs less.
        let benchmarkRequests = primaries == 1 ? requests : 2 * requests
        var durations: [String: [Duration]] = [:]
        var operations: [String: Int] = [:]
        var notes: [String] = []
        for _ in 0..<plan.runs {
            for concurrency in concurrencies {
                let external = try RedisBench.redisBenchmark(
                    benchmark,
                    cluster.nodes[0],
                    requests: benchmarkRequests,
                    clients: concurrency,
                    connection: primaries == 1 ? node : ["--cluster"] + node
                )
                for command in commands {
                    let ours = try await RedisBench.measureLevel(
                        level,
                        command,
                        value,
                        requests: requests,
                        callers: concurrency,
                        keys: keys
                    )
                    let hoard = hoardLabel(command, primaries, concurrency)
                    durations[hoard, default: []] += ours.durations
                    operations[hoard] = ours.operations
                    let theirs = benchmarkLabel(command, primaries, concurrency)
                    if let rate = external[command], rate > 0 {
                        durations[theirs, default: []].append(.seconds(Double(benchmarkRequests) / rate))
                        operations[theirs] = benchmarkRequests
                    } else if !notes.contains(where: { $0.hasPrefix(theirs) }) {
                        notes.append("\(theirs): redis-benchmark printed no \(command) rate")
                    }
                }
            }
        }
        var rows: [Measurement] = []
        for concurrency in concurrencies {
            for command in commands {
                for label in [
                    hoardLabel(command, primaries, concurrency), benchmarkLabel(command, primaries, concurrency),
                ] {
                    guard let runs = durations[label], let done = operations[label] else { continue }
                    rows.append(Measurement(label: label, operations: done, durations: runs))
                }
            }
        }
        // The keys every SET run wrote: the runs at the most callers leave out the remainder.
        let written = min(keys.count, concurrencies.map { requests / $0 * $0 }.min() ?? 0)
        notes += try await check(level, cluster, keys: Array(keys.prefix(written)), value: value)
        return (rows, notes)
    }

    /// How much redis-benchmark's threads can understate its rates.
    ///
    /// With `--cluster` it runs a thread per primary, and a thread notices that a test ended only
    /// on its 250 ms timer: a test's time is rounded up to the next tick (without threads, as on
    /// 1 primary, it is not).
    private static func tickNote(_ rows: [Measurement]) -> String {
        let shortest = rows.filter { $0.label.hasPrefix("redis-benchmark --cluster") }.flatMap(\.durations).min()
        var note =
            "redis-benchmark --cluster runs a thread per primary, which sees the end of a test only on a 250 ms "
            + "timer, so its times are rounded up to the next tick"
        if let shortest {
            note += String(
                format: ": up to 0.25 s of the %.2f s its shortest test here took (%.0f %%)",
                shortest.seconds,
                100 * 0.25 / shortest.seconds
            )
            if shortest < .seconds(1) { note += "; at this size its --cluster rates say little" }
        }
        return note
    }

    /// What the runs left: the keys Hoard wrote read back, and they sit on every primary.
    private static func check(
        _ level: RedisCacheLevel,
        _ cluster: BenchCluster,
        keys: [String],
        value: Data
    ) async throws -> [String] {
        var misses = 0
        let sample = stride(from: 0, to: keys.count, by: 100).map { keys[$0] }
        for key in sample {
            if (try? await level.get(key)) != value { misses += 1 }
        }
        let counts = try cluster.keyCounts()
        let spread = counts.map(grouped).joined(separator: ", ")
        var notes = [
            "\(counted(cluster.nodes.count)): keys per primary after the runs, redis-benchmark's too: \(spread)"
        ]
        if misses > 0 { notes.append("\(misses) of \(sample.count) keys Hoard set did not read back") }
        return notes
    }

    /// Ratios to redis-benchmark, their targets, and the growth from 1 primary to 3.
    private static func compare(_ report: inout ScenarioReport) {
        for primaries in primaryCounts {
            for concurrency in concurrencies {
                for command in commands {
                    let ours = hoardLabel(command, primaries, concurrency)
                    let theirs = benchmarkLabel(command, primaries, concurrency)
                    guard report.row(ours) != nil else { continue }
                    report.comparisons.append((ours, theirs))
                    report.targets.append(
                        .ratio(
                            "Hoard cluster \(command) at \(concurrency) in flight, \(counted(primaries)) "
                                + "≥ 0.7× \(primaries == 1 ? "redis-benchmark" : "redis-benchmark --cluster")",
                            report.row(ours),
                            report.row(theirs),
                            atLeast: 0.7
                        )
                    )
                }
            }
        }
        guard let most = primaryCounts.last, let least = primaryCounts.first else { return }
        for concurrency in concurrencies {
            for command in commands {
                for label in [hoardLabel, benchmarkLabel] {
                    let top = label(command, most, concurrency)
                    let bottom = label(command, least, concurrency)
                    guard let grown = report.row(top), let base = report.row(bottom) else { continue }
                    report.comparisons.append((top, bottom))
                    report.summaryText.append(
                        "\(top) / \(least) primary: \(formatRatio(grown.median / base.median))"
                    )
                }
            }
        }
        report.summary = report.rows.filter { $0.label.contains(" \(counted(most)),") }.map { ($0.label, $0.label) }
    }

    private static func hoardLabel(_ command: String, _ primaries: Int, _ concurrency: Int) -> String {
        "Hoard cluster \(command), \(counted(primaries)), \(concurrency) callers"
    }

    private static func benchmarkLabel(_ command: String, _ primaries: Int, _ concurrency: Int) -> String {
        "redis-benchmark\(primaries == 1 ? "" : " --cluster") \(command), \(counted(primaries)), -c \(concurrency)"
    }

    /// `1 primary`, `2 primaries`.
    private static func counted(_ primaries: Int) -> String {
        "\(primaries) \(primaries == 1 ? "primary" : "primaries")"
    }
}
