import Foundation
import Hoard
import HoardRedis

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

extension Fleet {
    /// The child's side of the two-process coherence test: one coherent instance of a fleet that
    /// does what the parent says, one command per line on standard input.
    ///
    /// Builds a string cache on `container` inside `folder` over the Redis server at `url` under
    /// `namespace` with `coherence(.invalidations)` (no fetcher), prints `ready`, then for each line:
    /// - `get <key>`: prints `value <key>=<value> <memory|none>` (where the key is after the read) or
    ///   `miss <key>`;
    /// - `start <key>`: as `get`, in a task of its own, so that the next commands run meanwhile;
    /// - `watch <key> <value>`: prints `watching <key>`, waits until memory no longer holds `value` for
    ///   the key and prints `dropped <key> <monotonic nanoseconds>` (`CLOCK_MONOTONIC`, comparable with
    ///   the parent's);
    /// - `spin <key> <value>`: as `watch`, looking again at once (yielding the core between looks)
    ///   instead of every 20 µs, and prints `dropped <key> <monotonic nanoseconds> held <monotonic
    ///   nanoseconds>`, the second time being the start of the last look that still found `value`
    ///   (or, when none did, the moment of `watching`): the key was dropped between the two;
    /// - `put <key> <value>`: sets the value, waiting for nothing, and prints `put <key>`;
    /// - `save <key> <value>`: saves the value (memory, disk and the server) and prints `saved <key>`;
    /// - `stats`: prints `stats invalidations <n> flushes <n>`.
    ///
    /// An optional fifth argument is the shared level's command timeout in seconds (10 when absent):
    /// a test that holds a reply for as long as a loaded run takes to do something else meanwhile
    /// must not see the read time out first. An optional sixth is the tracking connection's ping
    /// timeout in seconds (the level's default when absent): a test that holds the announcements
    /// back must not see the connection counted as lost first.
    ///
    /// Ends at the end of its input.
    static func watch(arguments: [String]) async throws {
        let commandTimeout = arguments.count > 4 ? Int(arguments[4]) : 10
        guard let commandTimeout, commandTimeout > 0 else { Worker.usage() }
        var configuration = try RedisCacheLevel.Configuration(url: argument(arguments, 2))
        configuration.connectTimeout = .seconds(10)
        configuration.commandTimeout = .seconds(commandTimeout)
        if arguments.count > 5 {
            guard let pingTimeout = Int(arguments[5]), pingTimeout > 0 else { Worker.usage() }
            configuration.trackingPingTimeout = .seconds(pingTimeout)
        }
        let cache = try CacheBuilder<String>(serializer: StringSerializer())
            .containerName(argument(arguments, 1))
            .directory(URL(fileURLWithPath: argument(arguments, 0), isDirectory: true))
            .sharedLevel(try RedisCacheLevel(configuration, namespace: argument(arguments, 3)))
            // A day, not the default minute: a loaded run can stall this process for more than a
            // minute between a fill and the look at its copy.
            .coherence(.invalidations(maxLocalAge: .seconds(86_400)))
            .build()
        emit("ready")
        while let line = Swift.readLine() {
            let words = line.split(separator: " ").map(String.init)
            switch words.first {
            case "get" where words.count == 2:
                let key = words[1]
                if let value = try? await cache.getOrFetch(forKey: key) {
                    await cache.flush()
                    let level = cache.entry(forKey: key)?.level == .memory ? "memory" : "none"
                    emit("value \(key)=\(value) \(level)")
                } else {
                    emit("miss \(key)")
                }
            case "watch" where words.count == 3:
                let (key, value) = (words[1], words[2])
                emit("watching \(key)")
                while cache.entry(forKey: key).map({ $0.level == .memory && $0.value == value }) ?? false {
                    usleep(20)
                }
                emit("dropped \(key) \(monotonicNanoseconds())")
            case "spin" where words.count == 3:
                let (key, value) = (words[1], words[2])
                emit("watching \(key)")
                // Until a look finds it, the value was last seen held by the `get` that installed it.
                var held = monotonicNanoseconds()
                while true {
                    let look = monotonicNanoseconds()
                    guard cache.entry(forKey: key).map({ $0.level == .memory && $0.value == value }) ?? false else {
                        break
                    }
                    held = look
                    sched_yield()
                }
                emit("dropped \(key) \(monotonicNanoseconds()) held \(held)")
            case "put" where words.count == 3:
                cache[words[1]] = words[2]
                emit("put \(words[1])")
            case "start" where words.count == 2:
                let key = words[1]
                Task {
                    if let value = try? await cache.getOrFetch(forKey: key) {
                        await cache.flush()
                        let level = cache.entry(forKey: key)?.level == .memory ? "memory" : "none"
                        emit("value \(key)=\(value) \(level)")
                    } else {
                        emit("miss \(key)")
                    }
                }
            case "save" where words.count == 3:
                try await cache.save(words[2], forKey: words[1])
                emit("saved \(words[1])")
            case "stats":
                let statistics = cache.statistics
                emit("stats invalidations \(statistics.invalidations) flushes \(statistics.coherenceFlushes)")
            default:
                emit("error unknown command \(line)")
            }
        }
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds: one clock for every process of the machine.
func monotonicNanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}
