import Foundation
import Hoard
import HoardRedis
import HoardTestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

extension Fleet {
    /// The child's side of the multi-process lease test: one instance of a fleet with
    /// `fleetSingleFetch`, whose slow origin leaves one file per call as its side effect.
    ///
    /// Arguments: `<folder> <container> <redis url> <namespace> <origin folder> <origin ms> <callers>
    /// <key>…`. Builds the cache, prints `ready`, waits for a line on standard input (so that every
    /// process starts at once), then has `callers` tasks get every key at the same time. The origin
    /// creates `<origin folder>/<key>.<pid>.<n>` and answers `origin <key>` after `origin ms`. Prints
    /// `bad <key>=<value>` for a wrong value, then flushes and prints `done fetches <n>`.
    static func lease(arguments: [String]) async throws {
        let origin = URL(fileURLWithPath: argument(arguments, 4), isDirectory: true)
        guard let delay = Int(argument(arguments, 5)), let callers = Int(argument(arguments, 6)) else {
            Worker.usage()
        }
        let keys = Array(arguments.dropFirst(7))
        let calls = Counter()
        let cache = try CacheBuilder<String>(serializer: StringSerializer())
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
            // Generous: a loaded machine must not make a waiter give up and fetch.
            .fleetSingleFetch(leaseDuration: .seconds(120), waitLimit: .seconds(120))
            .fetcher { key in
                let call = calls.increment()
                let mark = origin.appendingPathComponent("\(key).\(getpid()).\(call)")
                _ = FileManager.default.createFile(atPath: mark.path, contents: nil)
                try await Task.sleep(for: .milliseconds(delay))
                return "origin \(key)"
            }
            .build()
        emit("ready")
        _ = Swift.readLine()
        await withTaskGroup(of: Void.self) { group in
            for key in keys {
                for _ in 0..<callers {
                    group.addTask {
                        let value = (try? await cache.getOrFetch(forKey: key)) ?? "an error"
                        if value != "origin \(key)" { emit("bad \(key)=\(value)") }
                    }
                }
            }
        }
        await cache.flush()
        emit("done fetches \(calls.value)")
    }
}
