import Foundation
import Hoard
import HoardRedis
import HoardTestSupport

/// Measures `coherence(.invalidations)`: how soon another instance forgets a key one instance wrote,
/// and what tracking costs a fleet's throughput and a memory hit.
///
/// Two instances in this process, each a cache with its own connections and its own tracking
/// connection (different client names), memory in front of the shared level (disk off).
/// - Invalidation latency: 10 000 times, instance B holds a key in memory, A saves a new value, and
///   the time from A's `save` returning to B's memory dropping the key is taken (0 when B dropped it
///   first). p50, p99 and the maximum.
/// - Throughput: 2 instances × 32 callers, Zipf(0.99) over 10 000 keys, 90 % `getOrFetch`, 10 %
///   `set`, coherent vs `ttlOnly(maxAge: 60 s)`, in three rounds on fresh instances, the order
///   alternating; the rows are the medians, and each round's ratio is printed.
/// - A memory hit (`cache[key]`) with no coherence, TTL-only and coherent.
/// - Across processes: 2 000 times, a `hoard-test-worker fleet-watch` child holds a key in memory, A
///   saves a new value, and the child reports on `CLOCK_MONOTONIC` when its memory dropped the key:
///   p50, p99 and maximum after A's `save` returned, and the share of rounds in which the child still
///   held the old value then. Skipped, with a note, when the worker was not built next to this
///   executable.
/// - Own saves: 50 `save`s on a cache with memory and disk; how many it still holds once the
///   server's announcements of them came back, coherent, TTL-only and without coherence.
/// - Outages, on a `redis-server` of its own: for each of coherent (serving local copies), coherent
///   with `bypassLocalCopies`, TTL-only and no coherence, and for `kill -9` (then a restart) and
///   `SIGSTOP` (then `SIGCONT`) lasting 5 s (1 s with `--quick`): 100 keys filled through a counting
///   fetcher, one task reading them in turn with `getOrFetch` during the outage; the fetcher calls
///   and the reads' latency p50, p99 and maximum.
///
/// With `HOARD_BENCH_COHERENCE_FLEET_ONLY=1` only the throughput runs are made, followed by what
/// each fleet did in its first round (reads, hits, misses; invalidations received, by whether the instance held the
/// key; fills installed and rejected, by why) and the hit rates of the same operations replayed on
/// one thread, where only first reads and true invalidations cost hits.
///
/// Scenario `coherence`; the server is `HOARD_REDIS_URL`'s, else a `redis-server` started for the run.
enum CoherenceBench {
    static func run(_ context: BenchContext) async throws -> ScenarioReport {
        var report = ScenarioReport(
            name: "coherence",
            title: "coherence(.invalidations): invalidation latency, fleet throughput, memory-hit cost"
        )
        let server: BenchServer
        do {
            server = try await BenchServer.start()
        } catch {
            report.notes.append("skipped: no Redis server (\(error)); set HOARD_REDIS_URL or install redis-server")
            return report
        }
        defer { server.stop() }
        let namespace = "hoard-bench-coherence-\(UUID().uuidString.prefix(8))"
        let coherent = try instance(server, namespace, "a", .invalidations)
        let other = try instance(server, namespace, "b", .invalidations)
        if ProcessInfo.processInfo.environment["HOARD_BENCH_COHERENCE_FLEET_ONLY"] == "1" {
            try await reportFleet(into: &report, server: server, namespace: namespace, [coherent, other], context)
            return report
        }
        let sets = context.size(10_000)
        let (fromReturn, fromCall) = try await measureLatency(writer: coherent, reader: other, sets: sets)
        func micro(_ duration: Duration) -> String { String(format: "%.0f µs", duration.seconds * 1e6) }
        for (latencies, start) in [(fromReturn, "A's save returned"), (fromCall, "A called save")] {
            report.lines.append(
                "invalidation latency over \(latencies.count) sets (\(start) → B's memory dropped the key): "
                    + "p50 \(micro(latencies[latencies.count / 2])), "
                    + "p99 \(micro(latencies[latencies.count * 99 / 100])), max \(micro(latencies[latencies.count - 1]))"
            )
        }
        report.summaryText += report.lines

        let fleets = try await measureFleets(server: server, namespace: namespace, operations: context.size(200_000))
        report.rows += [fleets.coherent.measurement, fleets.ttlOnly.measurement]
        report.lines += [fleets.hitRateLine, fleets.roundsLine]
        report.comparisons.append((fleets.coherent.measurement.label, fleets.ttlOnly.measurement.label))

        let plain = try instance(server, namespace + "-plain", "e", nil)
        let ttlOnly = try instance(server, namespace + "-ttl", "c", .ttlOnly(maxAge: .seconds(60)))
        let hits = context.size(2_000_000)
        var hitRows: [Measurement] = []
        for (label, cache) in [("no coherence", plain), ("TTL-only", ttlOnly), ("coherent", coherent)] {
            cache["hot"] = "value"
            await cache.flush()
            var found = 0
            let elapsed = time {
                for _ in 0..<hits where cache["hot"] != nil { found &+= 1 }
            }
            report.checksum &+= UInt64(found)
            hitRows.append(Measurement(label: "memory hit, \(label)", operations: hits, durations: [elapsed]))
        }
        report.rows += hitRows
        report.unrated = Set(hitRows.map(\.label))
        report.comparisons.append((hitRows[2].label, hitRows[1].label))
        report.summary = report.rows.map { ($0.label, $0.label) }
        report.notes.append("server: \(server.url); memory 10 000 entries per instance, disk off")

        await reportCrossProcess(into: &report, server: server, namespace: namespace, writer: coherent, context)
        await reportOwnSaves(into: &report, server: server, namespace: namespace + "-own")
        await reportOutages(into: &report, context)
        return report
    }

    private static func reportCrossProcess(
        into report: inout ScenarioReport,
        server: BenchServer,
        namespace: String,
        writer: Cache<String>,
        _ context: BenchContext
    ) async {
        guard let worker = BenchWorker.executable else {
            report.notes.append(
                "two processes: skipped, no hoard-test-worker next to this executable; build it with "
                    + "`swift build -c release --product hoard-test-worker` (or without -c release for a debug run)"
            )
            return
        }
        let run: CrossProcessRun
        do {
            run = try await measureCrossProcess(
                worker: worker,
                server: server,
                namespace: namespace,
                writer: writer,
                rounds: context.size(2_000)
            )
        } catch {
            report.notes.append("two processes: stopped, \(error)")
            return
        }
        guard let last = run.latencies.last else {
            report.notes.append("two processes: no round completed (\(run.skipped) skipped)")
            return
        }
        let rounds = run.latencies.count
        func share(_ count: Int) -> String { String(format: "%.1f %%", Double(count) * 100 / Double(rounds)) }
        let lines = [
            "two processes, \(rounds) sets (A's save returned → the other process's memory dropped the key): "
                + "p50 \(formatLatency(run.latencies[rounds / 2])), "
                + "p99 \(formatLatency(run.latencies[rounds * 99 / 100])), max \(formatLatency(last))",
            "two processes: the other process still held the old value when A's save returned in "
                + "\(share(run.seenStale)) – \(share(run.maybeStale)) of the sets (seen holding it after the return "
                + "– not yet seen without it); its reads after the drop: \(run.staleReads) of \(rounds) old",
        ]
        report.lines += lines
        report.summaryText += lines
        if run.skipped > 0 {
            report.notes.append("two processes: \(run.skipped) rounds skipped (the child never held the old value)")
        }
    }

    private static func reportOwnSaves(into report: inout ScenarioReport, server: BenchServer, namespace: String) async
    {
        let modes: [(String, CacheCoherence?)] = [
            ("coherent", .invalidations), ("TTL-only (60 s)", .ttlOnly(maxAge: .seconds(60))), ("no coherence", nil),
        ]
        var parts: [String] = []
        for (number, (label, coherence)) in modes.enumerated() {
            do {
                let result = try await measureOwnSaves(
                    server: server,
                    namespace: "\(namespace)-\(number)",
                    label: label,
                    coherence: coherence
                )
                parts.append("\(label) \(result.inMemory) in memory, \(result.onDisk) on disk")
                if !result.sawEchoes {
                    report.notes.append("own saves, \(label): the observer saw fewer than 50 announcements in 10 s")
                }
            } catch {
                report.notes.append("own saves, \(label): stopped, \(error)")
            }
        }
        guard !parts.isEmpty else { return }
        let line = "own saves still held once their announcements came back, of 50: " + parts.joined(separator: "; ")
        report.lines.append(line)
        report.summaryText.append(line)
    }

    private static func reportOutages(into report: inout ScenarioReport, _ context: BenchContext) async {
        let server: BenchServer
        do {
            server = try await BenchServer.start(own: true)
        } catch {
            report.notes.append("outages: skipped, no redis-server of its own to kill (\(error))")
            return
        }
        defer { server.stop() }
        let outage: Duration = context.quick ? .seconds(1) : .seconds(5)
        let runs: [OutageRun]
        do {
            runs = try await measureOutages(server: server, outage: outage)
        } catch {
            report.notes.append("outages: stopped, \(error)")
            return
        }
        for run in runs {
            let latencies = run.latencies
            report.lines.append(
                "outage \(Int(outage.seconds)) s, \(run.fault.rawValue), \(run.label): \(run.originCalls) origin calls, "
                    + "\(latencies.count) reads, latency p50 \(formatLatency(latencies.percentile(0.5))), "
                    + "p99 \(formatLatency(latencies.percentile(0.99))), max \(formatLatency(latencies.maximum))"
            )
            if run.filled < 100 {
                report.notes.append(
                    "outage, \(run.fault.rawValue), \(run.label): only \(run.filled) of 100 keys were in memory at its start"
                )
            }
        }
        report.notes.append(
            "outages: a redis-server of the scenario's own; memory only, 100 keys, the level's default 1 s timeouts "
                + "and skipping after 3"
        )
    }

    /// One instance: a string cache in memory over its own level (its own connections).
    static func instance(
        _ server: BenchServer,
        _ namespace: String,
        _ name: String,
        _ coherence: CacheCoherence?
    ) throws -> Cache<String> {
        var configuration = try RedisCacheLevel.Configuration(url: server.url)
        configuration.clientName = "hoard-bench-\(name)"
        configuration.commandTimeout = .seconds(10)
        let level = try RedisCacheLevel(configuration, namespace: namespace)
        var builder = CacheBuilder<String>(serializer: StringSerializer())
            .maxDiskCount(0)
            .maxRamCount(10_000)
            .sharedLevel(level)
            .fetcher { key in "fetched \(key)" }
        if let coherence { builder = builder.coherence(coherence) }
        return try builder.build()
    }

    /// The time from `writer`'s save returning (and from its call) to `reader`'s memory dropping the
    /// key, `sets` times, each sorted.
    private static func measureLatency(
        writer: Cache<String>,
        reader: Cache<String>,
        sets: Int
    ) async throws -> (fromReturn: [Duration], fromCall: [Duration]) {
        var latencies: [Duration] = []
        var fromCall: [Duration] = []
        latencies.reserveCapacity(sets)
        fromCall.reserveCapacity(sets)
        for round in 0..<sets {
            let key = "latency-\(round % 100)"
            let old = "old \(round)"
            try await writer.save(old, forKey: key)
            // B reads the old value into memory; a read that raced the write's invalidation is not
            // installed, and is made again.
            for _ in 0..<1_000 {
                _ = try await reader.getOrFetch(forKey: key)
                if reader.entry(forKey: key)?.value == old { break }
                await Task.yield()
            }
            let called = ContinuousClock.now
            try await writer.save("new \(round)", forKey: key)
            let saved = ContinuousClock.now
            while reader.entry(forKey: key).map({ $0.level == .memory && $0.value == old }) ?? false {}
            let dropped = ContinuousClock.now
            latencies.append(saved.duration(to: dropped))
            fromCall.append(called.duration(to: dropped))
        }
        return (latencies.sorted(), fromCall.sorted())
    }

    /// Both fleets of the scenario, measured over ``fleetRounds`` rounds.
    struct Fleets {
        /// The coherent fleet: its runs, its mean memory hit rate, its first round's counts.
        var coherent: (measurement: Measurement, hitRate: Double, counts: FleetCounts)
        /// The TTL-only fleet, likewise.
        var ttlOnly: (measurement: Measurement, hitRate: Double, counts: FleetCounts)
        /// Coherent throughput over TTL-only throughput, one per round.
        var ratios: [Double]

        var hitRateLine: String {
            String(
                format: "memory hit rate of the fleet runs: coherent %.1f %%, TTL-only %.1f %%",
                coherent.hitRate * 100,
                ttlOnly.hitRate * 100
            )
        }

        /// The median of ``ratios``: each round's pair ran back to back.
        var medianRatio: Double {
            let sorted = ratios.sorted()
            let middle = sorted.count / 2
            return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
        }

        var roundsLine: String {
            "throughput coherent / TTL-only, round by round: "
                + ratios.map { String(format: "%.2f", $0) }.joined(separator: ", ")
                + String(format: " (median %.2f)", medianRatio)
        }
    }

    /// Rounds of the two fleets; each round measures both, in turn first.
    static var fleetRounds: Int { 3 }

    /// Measures a coherent and a TTL-only fleet (two instances each) ``fleetRounds`` times.
    ///
    /// The order alternates (coherent first, then TTL-only first, …), and each round runs on fresh
    /// instances and namespaces. One pair of runs carries the whole noise of a shared host (0.55×
    /// to 0.96× in nine runs of one build); the median of alternating rounds favours neither fleet.
    private static func measureFleets(server: BenchServer, namespace: String, operations: Int) async throws -> Fleets {
        let coherentLabel = "2 × 32 callers, coherent (invalidations)"
        let ttlLabel = "2 × 32 callers, TTL-only (60 s)"
        var coherentRuns: [(measurement: Measurement, hitRate: Double, counts: FleetCounts)] = []
        var ttlRuns: [(measurement: Measurement, hitRate: Double, counts: FleetCounts)] = []
        for round in 0..<fleetRounds {
            let coherent = [
                try instance(server, "\(namespace)-coherent-\(round)", "a\(round)", .invalidations),
                try instance(server, "\(namespace)-coherent-\(round)", "b\(round)", .invalidations),
            ]
            let ttlOnly = [
                try instance(server, "\(namespace)-ttl-\(round)", "c\(round)", .ttlOnly(maxAge: .seconds(60))),
                try instance(server, "\(namespace)-ttl-\(round)", "d\(round)", .ttlOnly(maxAge: .seconds(60))),
            ]
            if round % 2 == 0 {
                coherentRuns.append(try await measureFleet(coherent, label: coherentLabel, operations: operations))
                ttlRuns.append(try await measureFleet(ttlOnly, label: ttlLabel, operations: operations))
            } else {
                ttlRuns.append(try await measureFleet(ttlOnly, label: ttlLabel, operations: operations))
                coherentRuns.append(try await measureFleet(coherent, label: coherentLabel, operations: operations))
            }
        }
        func combined(
            _ runs: [(measurement: Measurement, hitRate: Double, counts: FleetCounts)],
            _ label: String
        ) -> (measurement: Measurement, hitRate: Double, counts: FleetCounts) {
            (
                Measurement(
                    label: label,
                    operations: runs[0].measurement.operations,
                    durations: runs.flatMap(\.measurement.durations)
                ),
                runs.map(\.hitRate).reduce(0, +) / Double(runs.count),
                runs[0].counts
            )
        }
        return Fleets(
            coherent: combined(coherentRuns, coherentLabel),
            ttlOnly: combined(ttlRuns, ttlLabel),
            ratios: zip(coherentRuns, ttlRuns).map { $0.measurement.median / $1.measurement.median }
        )
    }

    /// 32 callers per instance, each making its share of `operations`: Zipf(0.99) keys over 10 000,
    /// one in ten a set.
    private static func measureFleet(
        _ instances: [Cache<String>],
        label: String,
        operations: Int
    ) async throws -> (measurement: Measurement, hitRate: Double, counts: FleetCounts) {
        let callers = 32
        let before = FleetCounts(instances)
        let each = operations / (instances.count * callers)
        let zipf = ZipfSampler(keys: 10_000, exponent: 0.99)
        let start = ContinuousClock.now
        let reads = try await withThrowingTaskGroup(of: Int.self) { group in
            for (number, cache) in instances.enumerated() {
                for caller in 0..<callers {
                    group.addTask {
                        var random = SplitMix64(seed: UInt64(number * 100 + caller))
                        var reads = 0
                        for step in 0..<each {
                            let key = "zipf-\(zipf.next(using: &random))"
                            if random.next() % 10 == 0 {
                                cache.set("set \(step)", forKey: key)
                            } else {
                                reads += 1
                                _ = try await cache.getOrFetch(forKey: key)
                            }
                        }
                        return reads
                    }
                }
            }
            return try await group.reduce(0, +)
        }
        let elapsed = ContinuousClock.now - start
        for cache in instances { await cache.flush() }
        var counts = FleetCounts(instances).since(before)
        counts.reads = reads
        return (
            Measurement(label: label, operations: each * instances.count * callers, durations: [elapsed]),
            Double(counts.memoryHits) / Double(reads),
            counts
        )
    }

    /// The throughput runs alone (`HOARD_BENCH_COHERENCE_FLEET_ONLY=1`), coherent then TTL-only, with
    /// what each fleet did and the hit rates of the same operations replayed on one thread.
    private static func reportFleet(
        into report: inout ScenarioReport,
        server: BenchServer,
        namespace: String,
        _ instances: [Cache<String>],
        _ context: BenchContext
    ) async throws {
        let operations = context.size(200_000)
        let fleets = try await measureFleets(server: server, namespace: namespace, operations: operations)
        report.rows += [fleets.coherent.measurement, fleets.ttlOnly.measurement]
        report.comparisons.append((fleets.coherent.measurement.label, fleets.ttlOnly.measurement.label))
        report.summary = report.rows.map { ($0.label, $0.label) }
        let ideal = idealHitRates(instances: 2, callers: 32, each: operations / 64)
        let lines = [
            fleets.hitRateLine
                + String(format: "; throughput coherent / TTL-only %.2f (median of the rounds)", fleets.medianRatio),
            fleets.roundsLine,
            fleets.coherent.counts.line("coherent, first round"),
            fleets.ttlOnly.counts.line("TTL-only, first round"),
            String(
                format: "replayed on one thread: coherent %.1f %%, TTL-only %.1f %% (%d true invalidations)",
                ideal.coherent * 100,
                ideal.ttlOnly * 100,
                ideal.trueInvalidations
            ),
        ]
        report.lines += lines
        report.summaryText += lines
    }
}
