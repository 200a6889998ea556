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
///   `set`, coherent vs `ttlOnly(maxAge: 60 s)`.
/// - A memory hit (`cache[key]`) with no coherence, TTL-only and coherent.
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

        let operations = context.size(200_000)
        let coherentRun = try await measureFleet(
            [coherent, other],
            label: "2 × 32 callers, coherent (invalidations)",
            operations: operations
        )
        let ttlOnly = [
            try instance(server, namespace + "-ttl", "c", .ttlOnly(maxAge: .seconds(60))),
            try instance(server, namespace + "-ttl", "d", .ttlOnly(maxAge: .seconds(60))),
        ]
        let ttlRun = try await measureFleet(ttlOnly, label: "2 × 32 callers, TTL-only (60 s)", operations: operations)
        report.rows += [coherentRun.measurement, ttlRun.measurement]
        report.lines.append(
            String(
                format: "memory hit rate of the fleet runs: coherent %.1f %%, TTL-only %.1f %%",
                coherentRun.hitRate * 100,
                ttlRun.hitRate * 100
            )
        )
        report.comparisons.append((coherentRun.measurement.label, ttlRun.measurement.label))

        let plain = try instance(server, namespace + "-plain", "e", nil)
        let hits = context.size(2_000_000)
        var hitRows: [Measurement] = []
        for (label, cache) in [("no coherence", plain), ("TTL-only", ttlOnly[0]), ("coherent", coherent)] {
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
        return report
    }

    /// One instance: a string cache in memory over its own level (its own connections).
    private static func instance(
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

    /// 32 callers per instance, each making its share of `operations`: Zipf(0.99) keys over 10 000,
    /// one in ten a set.
    private static func measureFleet(
        _ instances: [Cache<String>],
        label: String,
        operations: Int
    ) async throws -> (measurement: Measurement, hitRate: Double) {
        let callers = 32
        let hitsBefore = instances.map(\.statistics.memoryHits).reduce(0, +)
        let each = operations / (instances.count * callers)
        let zipf = ZipfSampler(keys: 10_000, exponent: 0.99)
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (number, cache) in instances.enumerated() {
                for caller in 0..<callers {
                    group.addTask {
                        var random = SplitMix64(seed: UInt64(number * 100 + caller))
                        for step in 0..<each {
                            let key = "zipf-\(zipf.next(using: &random))"
                            if random.next() % 10 == 0 {
                                cache.set("set \(step)", forKey: key)
                            } else {
                                _ = try await cache.getOrFetch(forKey: key)
                            }
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let elapsed = ContinuousClock.now - start
        for cache in instances { await cache.flush() }
        let hits = instances.map(\.statistics.memoryHits).reduce(0, +) - hitsBefore
        let reads = Double(each * instances.count * callers) * 0.9
        return (
            Measurement(label: label, operations: each * instances.count * callers, durations: [elapsed]),
            Double(hits) / reads
        )
    }
}
