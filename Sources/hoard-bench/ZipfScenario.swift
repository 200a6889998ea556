import Foundation
import Hoard

/// `zipf`: get-or-set (a get, and a set on a miss) on Zipf(0.99) keys drawn over 1M keys, into a
/// memory-only cache of 10k entries, for every eviction policy and the plain LRU baseline: the
/// speed of a realistic mix of hits and evicting sets, and the hit rate it buys.
enum ZipfGetOrSet {
    static let plainLRU = "plain LRU behind one lock"

    static func label(_ policy: EvictionPolicy) -> String { "Hoard Cache<Int> \(policy)" }

    static func run(_ context: BenchContext) async throws -> ScenarioReport {
        let keyCount = context.size(1_000_000)
        let capacity = context.size(10_000)
        let requestCount = context.size(1_000_000)
        let keys = makeKeys(keyCount)
        let trace = zipfIndices(count: requestCount, keys: keyCount, exponent: 0.99, seed: 0x5A49_5046)
        var report = ScenarioReport(
            name: "zipf",
            title:
                "\(grouped(requestCount)) get-or-set requests, Zipf(0.99) over \(grouped(keyCount)) String keys, "
                + "memory-only cache of \(grouped(capacity)), 1 thread"
        )
        var hitCounts: [String: Int] = [:]
        var checksum: UInt64 = 0
        var rows: [Contender] = []
        for policy in EvictionPolicy.allCases {
            let label = label(policy)
            rows.append(
                Contender(label: label, operations: requestCount) {
                    let cache = try memoryOnlyCache(capacity: capacity, policy: policy)
                    var hits = 0
                    var sum: UInt64 = 0
                    let elapsed = time {
                        for index in trace {
                            if let value = cache[keys[index]] {
                                hits += 1
                                sum &+= UInt64(value)
                            } else {
                                cache[keys[index]] = index
                            }
                        }
                    }
                    hitCounts[label] = hits
                    checksum &+= sum &+ UInt64(cache.memoryCount)
                    return elapsed
                }
            )
        }
        rows.append(
            Contender(label: plainLRU, operations: requestCount) {
                let lru = PlainLRU<String, Int>(capacity: capacity)
                var hits = 0
                var sum: UInt64 = 0
                let elapsed = time {
                    for index in trace {
                        if let value = lru.value(forKey: keys[index]) {
                            hits += 1
                            sum &+= UInt64(value)
                        } else {
                            lru.set(index, forKey: keys[index])
                        }
                    }
                }
                hitCounts[plainLRU] = hits
                checksum &+= sum &+ UInt64(lru.entryCount)
                return elapsed
            }
        )
        report.rows = try await measureInterleaved(rows, plan: context.plan)
        report.reference = plainLRU
        let distinct = Set(trace).count
        report.lines.append(
            "hit rate (every run of a row hits the same requests; \(grouped(distinct)) distinct keys requested, "
                + "so at most \(String(format: "%.1f", Double(requestCount - distinct) * 100 / Double(requestCount))) %):"
        )
        for row in report.rows {
            let rate = Double(hitCounts[row.label] ?? 0) * 100 / Double(requestCount)
            report.lines.append(
                "  \(row.label.padding(toLength: 28, withPad: " ", startingAt: 0))\(String(format: "%5.1f %%", rate))"
            )
            report.summaryText.append(
                "zipf get-or-set, \(row.label): \(formatRate(row.median)), hit rate \(String(format: "%.1f", rate)) %"
            )
        }
        // The LRU rows do the same work (the same hits and misses), so their ratio compares speed alone.
        if hitCounts[label(.lru)] != hitCounts[plainLRU] {
            report.notes.append(
                "Hoard lru and the plain LRU hit different requests (\(hitCounts[label(.lru)] ?? 0) vs "
                    + "\(hitCounts[plainLRU] ?? 0)): one of them is not LRU"
            )
        }
        report.comparisons = [(label(.lru), plainLRU)]
        report.checksum = checksum
        return report
    }
}
