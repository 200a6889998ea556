import Foundation
import Hoard
import HoardRedis
import HoardTestSupport

/// The child's side of the two-process fleet test: one instance of a fleet over a Redis server.
enum Fleet {
    /// Builds a string cache on `container` inside `folder` whose shared level is the Redis server
    /// at `url` under `namespace`, and whose fetcher answers `fetched by the child <key>`; gets each
    /// of the keys after the first five arguments and prints, for each, `value <key>=<value>`;
    /// then flushes (so what it fetched is on the server) and prints
    /// `done fetches <n> sharedHits <n> sharedMisses <n>`.
    static func get(arguments: [String]) async throws {
        let fetches = Counter()
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
            .fetcher { key in
                _ = fetches.increment()
                return "fetched by the child \(key)"
            }
            .build()
        for key in arguments.dropFirst(4) {
            emit("value \(key)=\(try await cache.getOrFetch(forKey: key))")
        }
        await cache.flush()
        let statistics = cache.statistics
        emit(
            "done fetches \(fetches.value) sharedHits \(statistics.sharedHits) "
                + "sharedMisses \(statistics.sharedMisses)"
        )
    }
}
