import Foundation
import Hoard
import HoardRedis

extension Fleet {
    /// The child's side of the test of a lease holder that dies: one instance of a fleet with
    /// `fleetSingleFetch`, whose origin never answers.
    ///
    /// Arguments: `<folder> <container> <redis url> <namespace> <lease ms> <wait limit ms> <key>`.
    /// Builds the cache, prints `ready`, gets the key; its fetcher prints `fetching <key>` (the lease
    /// is then held) and waits until the process is killed.
    static func leaseHolder(arguments: [String]) async throws {
        guard let lease = Int(argument(arguments, 4)), let limit = Int(argument(arguments, 5)) else {
            Worker.usage()
        }
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
            .fleetSingleFetch(leaseDuration: .milliseconds(lease), waitLimit: .milliseconds(limit))
            .fetcher { key in
                emit("fetching \(key)")
                try await Task.sleep(for: .seconds(86_400))
                return "fetched by the holder \(key)"
            }
            .build()
        emit("ready")
        let value = try await cache.getOrFetch(forKey: argument(arguments, 6))
        emit("value \(value)")
    }
}
