import Foundation
import Hoard

/// Hit rates of every eviction policy, through the real `Cache` (memory only: get, and set on a
/// miss), next to Belady's optimum.
///
/// Four traces of 1M requests over 100k keys: Zipf(0.8) and Zipf(0.99), static; Zipf(0.99) with a
/// burst of 10k one-shot keys after every 50k requests (a scan); and Zipf(0.99) whose hot set moves
/// every 100k requests (the ranks are shifted by a random offset), where plain LFU collapses because
/// yesterday's popular keys keep their counts. Cache sizes are 1 %, 5 % and 10 % of the keys.
///
/// Each row checks the targets of W-TinyLFU, the default policy: within 1 point of the better of LRU
/// and LFU everywhere, and on the static traces within 1.5 points of exact LFU (the most that
/// counting can reach there). How much of the way from LRU to the optimum it closes is shown, not
/// checked: at 10 % even exact LFU closes less than half of it.
enum HitRate {
    static func run(_ context: BenchContext) async throws -> ScenarioReport {
        if let directory = context.tracesDirectory {
            return try await RealTraceHitRate.run(context, directory: directory, sizes: context.traceSizes)
        }
        let keyCount = context.size(100_000)
        let requests = context.size(1_000_000)
        var report = ScenarioReport(
            name: "hitrate",
            title: "hit rate (%) over \(grouped(keyCount)) keys, \(grouped(requests)) requests per trace"
        )
        let traces = [
            HitRateTrace.zipf(name: "zipf-0.8", exponent: 0.8, keys: keyCount, requests: requests, seed: 10),
            HitRateTrace.zipf(name: "zipf-0.99", exponent: 0.99, keys: keyCount, requests: requests, seed: 11),
            HitRateTrace.zipf(
                name: "scans",
                exponent: 0.99,
                keys: keyCount,
                requests: requests,
                scan: (every: context.size(50_000), length: context.size(10_000)),
                seed: 13
            ),
            HitRateTrace.zipf(
                name: "shifting",
                exponent: 0.99,
                keys: keyCount,
                requests: requests,
                shiftEvery: context.size(100_000),
                seed: 12
            ),
        ]
        let keys = makeKeys(traces.map(\.keySpace).max() ?? keyCount)
        let sizes = [1, 5, 10]
        let policies = [EvictionPolicy.lru, .lfu] + EvictionPolicy.allCases.filter { $0 != .lru && $0 != .lfu }
        report.lines.append(
            "trace      size" + policies.map { pad($0.description, 10) }.joined() + " exact-lfu       opt   targets"
        )
        var checksum: UInt64 = 0
        var failures = 0
        for trace in traces {
            for percent in sizes {
                let capacity = max(1, keyCount * percent / 100)
                var rates: [EvictionPolicy: Double] = [:]
                for policy in policies {
                    rates[policy] = try hitRate(policy, capacity: capacity, trace: trace.requests, keys: keys)
                    checksum &+= UInt64((rates[policy] ?? 0) * 1_000)
                }
                let optimum = trace.optimalHitRate(capacity: capacity)
                let perfectLFU = trace.perfectLFUHitRate(capacity: capacity)
                let verdict = targets(rates, optimum: optimum, perfectLFU: perfectLFU, isStatic: trace.isStatic)
                if !verdict.isMet { failures += 1 }
                let line =
                    "\(trace.name.padding(toLength: 9, withPad: " ", startingAt: 0))  \(pad("\(percent)%", 4))"
                    + policies.map { pad(String(format: "%.1f", rates[$0] ?? 0), 10) }.joined()
                    + pad(String(format: "%.1f", perfectLFU), 10) + pad(String(format: "%.1f", optimum), 10) + "   "
                    + verdict.text
                report.lines.append(line)
                report.summaryText.append(
                    "hit rate \(trace.name) \(percent)%: "
                        + policies.map { "\($0) \(String(format: "%.1f", rates[$0] ?? 0))" }.joined(separator: ", ")
                        + ", exact-lfu \(String(format: "%.1f", perfectLFU)), opt \(String(format: "%.1f", optimum))"
                )
            }
        }
        report.lines.append(
            "targets: w-tinylfu (the default) ≥ max(lru, lfu) − 1 on every row; on static traces also "
                + "w-tinylfu ≥ exact-lfu − 1.5. "
                + (failures == 0 ? "All rows meet them." : "\(failures) row(s) miss them.")
        )
        report.lines.append(
            "exact-lfu: a reference, not a policy: exact counts of every key ever requested, never aged "
                + "(see HitRateTrace.perfectLFUHitRate); about the most a policy that learns from counts "
                + "can reach on the static traces."
        )
        report.targets = [
            TargetCheck(
                target: "synthetic traces: w-tinylfu (the default) meets its targets on every row",
                measured: "\(traces.count * sizes.count - failures) of \(traces.count * sizes.count) rows",
                holds: failures == 0
            )
        ]
        report.checksum = checksum
        return report
    }

    /// Whether a row meets the default policy's targets, and a short text saying so.
    static func targets(
        _ rates: [EvictionPolicy: Double],
        optimum: Double,
        perfectLFU: Double,
        isStatic: Bool
    ) -> (isMet: Bool, text: String) {
        let lru = rates[.lru] ?? 0
        let adaptive = rates[.wTinyLFU] ?? 0
        let best = max(lru, rates[.lfu] ?? 0)
        var misses: [String] = []
        if adaptive < best - 1 { misses.append(String(format: "%.1f below best", best - adaptive)) }
        if isStatic && adaptive < perfectLFU - 1.5 {
            let closed = 100 * (adaptive - lru) / max(0.01, optimum - lru)
            let closedByCounts = 100 * (perfectLFU - lru) / max(0.01, optimum - lru)
            misses.append(
                String(
                    format: "%.1f below exact-lfu; closes %.0f%% of lru→opt (exact-lfu %.0f%%)",
                    perfectLFU - adaptive,
                    closed,
                    closedByCounts
                )
            )
        }
        if misses.isEmpty {
            let closed =
                isStatic
                ? String(format: " (%.0f%% of lru→opt)", 100 * (adaptive - lru) / max(0.01, optimum - lru)) : ""
            return (true, "ok" + closed)
        }
        return (false, "MISS: " + misses.joined(separator: "; "))
    }

    /// The percentage of requests that hit, for a memory-only cache that stores every miss.
    ///
    /// With no policy, the builder's default.
    static func hitRate(_ policy: EvictionPolicy?, capacity: Int, trace: [Int], keys: [String]) throws -> Double {
        let cache = try memoryOnlyCache(capacity: capacity, policy: policy)
        var hits = 0
        for index in trace {
            if cache[keys[index]] != nil {
                hits += 1
            } else {
                cache[keys[index]] = index
            }
        }
        return Double(hits) * 100 / Double(trace.count)
    }
}
