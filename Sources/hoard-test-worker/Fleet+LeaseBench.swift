import Foundation
import Hoard
import HoardRedis
import HoardTestSupport

extension Fleet {
    /// One process of `hoard-bench lease`: an instance of a fleet whose callers all miss the same
    /// cold keys at once, with or without `fleetSingleFetch`.
    ///
    /// Arguments: `<folder> <container> <redis url> <namespace> <origin ms> <callers>
    /// <on|on-coherent|off> <key count>` (`on-coherent` adds `coherence(.invalidations)`, whose
    /// invalidations wake the waiters). Builds the cache, prints `ready`, waits for a line on standard input (so that
    /// every process starts at once), then has `callers` tasks get the keys `key-0` … in order, each
    /// call timed. Prints `done fetches <origin calls> calls <n> errors <n> p50 <ns> p90 <ns> p99 <ns>
    /// max <ns> mean <ns>`.
    static func leaseBench(arguments: [String]) async throws {
        guard let delay = Int(argument(arguments, 4)), let callers = Int(argument(arguments, 5)),
            let keyCount = Int(argument(arguments, 7))
        else { Worker.usage() }
        let fetches = Counter()
        var builder = CacheBuilder<String>(serializer: StringSerializer())
            .containerName(argument(arguments, 1))
            .directory(URL(fileURLWithPath: argument(arguments, 0), isDirectory: true))
            .sharedLevel(
                try RedisCacheLevel(
                    url: argument(arguments, 2),
                    namespace: argument(arguments, 3),
                    connectTimeout: .seconds(10),
                    commandTimeout: .seconds(10)
                )
            )
            .maxRamCount(keyCount * 2)
            .maxDiskCount(keyCount * 2)
            .fetcher { key in
                fetches.increment()
                try await Task.sleep(for: .milliseconds(delay))
                return "origin \(key)"
            }
        let mode = argument(arguments, 6)
        if mode.hasPrefix("on") {
            builder = builder.fleetSingleFetch(leaseDuration: .seconds(10), waitLimit: .seconds(10))
        }
        if mode == "on-coherent" {
            builder = builder.coherence(.invalidations(maxLocalAge: .seconds(86_400)))
        }
        let cache = try builder.build()
        emit("ready")
        _ = Swift.readLine()
        let keys = (0..<keyCount).map { "key-\($0)" }
        let latencies = await withTaskGroup(of: ([Int64], Int).self) { group in
            for _ in 0..<callers {
                group.addTask {
                    var times: [Int64] = []
                    var errors = 0
                    times.reserveCapacity(keys.count)
                    let clock = ContinuousClock()
                    for key in keys {
                        let start = clock.now
                        if (try? await cache.getOrFetch(forKey: key)) != "origin \(key)" { errors += 1 }
                        let (seconds, attoseconds) = (clock.now - start).components
                        times.append(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
                    }
                    return (times, errors)
                }
            }
            var all: [Int64] = []
            var errors = 0
            for await (times, failed) in group {
                all += times
                errors += failed
            }
            return (all.sorted(), errors)
        }
        await cache.flush()
        let (times, errors) = latencies
        func percentile(_ share: Double) -> Int64 {
            times.isEmpty ? 0 : times[min(times.count - 1, Int(Double(times.count) * share))]
        }
        let mean = times.isEmpty ? 0 : times.reduce(0, +) / Int64(times.count)
        emit(
            "done fetches \(fetches.value) calls \(times.count) errors \(errors) p50 \(percentile(0.5)) "
                + "p90 \(percentile(0.9)) p99 \(percentile(0.99)) max \(times.last ?? 0) mean \(mean)"
        )
    }
}
