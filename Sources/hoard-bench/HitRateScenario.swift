import Foundation
import Hoard

/// Hit rates of the eviction policies, through the real `Cache` (memory only: get, and set on a miss).
///
/// Two traces of 1M requests over 100k keys, drawn from Zipf(0.99): one static, and one whose hot set
/// moves every 100k requests (the ranks are shifted by a random offset), where plain LFU collapses
/// because yesterday's popular keys keep their counts. Cache sizes are 1 %, 5 % and 10 % of the keys.
enum HitRate {
    static func run(_ context: BenchContext) async throws -> ScenarioReport {
        let keyCount = context.size(100_000)
        let requests = context.size(1_000_000)
        let shiftEvery = context.size(100_000)
        var report = ScenarioReport(
            name: "hitrate",
            title: "hit rate (%) on Zipf(0.99) over \(grouped(keyCount)) keys, \(grouped(requests)) requests"
        )
        let keys = makeKeys(keyCount)
        let traces = [
            ("static", trace(keys: keyCount, requests: requests, shiftEvery: nil, seed: 11)),
            ("shifting", trace(keys: keyCount, requests: requests, shiftEvery: shiftEvery, seed: 12)),
        ]
        let sizes = [1, 5, 10]
        report.lines.append("trace      size    lru    lfu")
        var checksum: UInt64 = 0
        for (name, trace) in traces {
            for percent in sizes {
                let capacity = max(1, keyCount * percent / 100)
                let lru = try hitRate(.lru, capacity: capacity, trace: trace, keys: keys)
                let lfu = try hitRate(.lfu, capacity: capacity, trace: trace, keys: keys)
                checksum &+= UInt64(lru * 1_000) &+ UInt64(lfu * 1_000)
                let line =
                    "\(name.padding(toLength: 9, withPad: " ", startingAt: 0))  \(pad("\(percent)%", 4))  "
                    + "\(String(format: "%5.1f", lru))  \(String(format: "%5.1f", lfu))"
                report.lines.append(line)
                report.summaryText.append(
                    "hit rate \(name) \(percent)%: lru \(String(format: "%.1f", lru)), lfu \(String(format: "%.1f", lfu))"
                )
            }
        }
        report.checksum = checksum
        return report
    }

    /// The percentage of requests that hit, for a memory-only cache that stores every miss.
    static func hitRate(_ policy: EvictionPolicy, capacity: Int, trace: [Int], keys: [String]) throws -> Double {
        let cache = try CacheBuilder<Int>()
            .containerName("hitrate")
            .maxRamCount(capacity)
            .maxDiskCount(0)
            .evictionPolicy(policy)
            .build()
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

    /// Key indices drawn from Zipf(0.99); with `shiftEvery`, every rank moves by a random offset that often.
    static func trace(keys: Int, requests: Int, shiftEvery: Int?, seed: UInt64) -> [Int] {
        var cumulative = [Double](repeating: 0, count: keys)
        var total = 0.0
        for rank in 0..<keys {
            total += 1 / pow(Double(rank + 1), 0.99)
            cumulative[rank] = total
        }
        var generator = SplitMix64(seed: seed)
        var offset = 0
        var trace: [Int] = []
        trace.reserveCapacity(requests)
        for request in 0..<requests {
            if let shiftEvery, request % shiftEvery == 0 { offset = Int(generator.next() % UInt64(keys)) }
            let target = Double(generator.next() >> 11) / Double(1 << 53) * total
            var low = 0
            var high = keys - 1
            while low < high {
                let middle = (low + high) / 2
                if cumulative[middle] < target { low = middle + 1 } else { high = middle }
            }
            trace.append((low + offset) % keys)
        }
        return trace
    }
}
