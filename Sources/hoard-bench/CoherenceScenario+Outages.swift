import Foundation
import Hoard
import HoardRedis
import HoardTestSupport

extension CoherenceBench {
    /// How the server fails in an outage measurement.
    enum Fault: String, CaseIterable {
        case kill = "kill -9, restart"
        case stop = "SIGSTOP, SIGCONT"
    }

    /// What one reader saw during one outage.
    struct OutageRun {
        let label: String
        let fault: Fault
        /// Fetcher calls between the fault and the server's return.
        let originCalls: Int
        /// The keys in memory when the fault began, of 100.
        let filled: Int
        /// `getOrFetch` latencies of the reads started during the outage.
        let latencies: LatencyHistogram
    }

    /// For each coherence mode and each fault: a cache (memory only, the level's default timeouts and
    /// skipping) fills 100 keys through a counting fetcher; then, while the server is down for
    /// `outage`, one task reads the 100 keys in turn with `getOrFetch` as fast as it can.
    ///
    /// - Throws: What the fill's reads throw, and ``BenchServer/Unavailable`` when the server does not
    ///   come back.
    static func measureOutages(server: BenchServer, outage: Duration) async throws -> [OutageRun] {
        let modes: [(String, CacheCoherence?)] = [
            ("coherent", .invalidations),
            (
                "coherent, bypassLocalCopies",
                .invalidations(maxLocalAge: .seconds(60), duringOutage: .bypassLocalCopies)
            ),
            ("TTL-only (60 s)", .ttlOnly(maxAge: .seconds(60))),
            ("no coherence", nil),
        ]
        var runs: [OutageRun] = []
        for fault in Fault.allCases {
            for (label, coherence) in modes {
                runs.append(try await measureOutage(server: server, fault: fault, outage: outage, label, coherence))
            }
        }
        return runs
    }

    private static func measureOutage(
        server: BenchServer,
        fault: Fault,
        outage: Duration,
        _ label: String,
        _ coherence: CacheCoherence?
    ) async throws -> OutageRun {
        let fetches = Counter()
        var configuration = try RedisCacheLevel.Configuration(url: server.url)
        configuration.clientName = "hoard-bench-outage"
        var builder = CacheBuilder<String>(serializer: StringSerializer())
            .maxDiskCount(0)
            .maxRamCount(10_000)
            .sharedLevel(
                try RedisCacheLevel(configuration, namespace: "hoard-bench-outage-\(UUID().uuidString.prefix(8))")
            )
            .fetcher { key in
                fetches.increment()
                return "origin \(key)"
            }
        if let coherence { builder = builder.coherence(coherence) }
        let cache = try builder.build()
        let keys = (0..<100).map { "outage-\($0)" }
        for key in keys { _ = try await cache.getOrFetch(forKey: key) }
        await cache.flush()
        // The fill's own writes come back as announcements, each checked by reading the key back: the
        // outage starts once every key is in memory and those checks had 200 ms more to end.
        let deadline = ContinuousClock.now + .seconds(5)
        while keys.contains(where: { cache.entry(forKey: $0)?.level != .memory }) && ContinuousClock.now < deadline {
            _ = try await cache.getOrFetch(forKey: keys.first { cache.entry(forKey: $0)?.level != .memory } ?? keys[0])
        }
        try await Task.sleep(for: .milliseconds(200))
        let filled = keys.filter { cache.entry(forKey: $0)?.level == .memory }.count

        let isOver = Protected(false)
        let before = fetches.value
        switch fault {
        case .kill: server.kill()
        case .stop: server.pause()
        }
        let reader = Task {
            var latencies = LatencyHistogram()
            var index = 0
            while !isOver.withLock({ $0 }) {
                let start = ContinuousClock.now
                _ = try? await cache.getOrFetch(forKey: keys[index % keys.count])
                latencies.record(start.duration(to: .now))
                index &+= 1
            }
            return latencies
        }
        try await Task.sleep(for: outage)
        isOver.withLock { $0 = true }
        let originCalls = fetches.value - before
        switch fault {
        case .kill: try await server.restart()
        case .stop: server.resume()
        }
        let latencies = await reader.value
        guard await server.answers(within: .seconds(10)) else {
            throw BenchServer.Unavailable(description: "redis-server did not answer within 10 s of \(fault.rawValue)")
        }
        return OutageRun(label: label, fault: fault, originCalls: originCalls, filled: filled, latencies: latencies)
    }
}
