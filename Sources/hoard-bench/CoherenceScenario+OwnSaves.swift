import Foundation
import Hoard
import HoardRedis

extension CoherenceBench {
    /// How many of a cache's own saves it still holds once the server's announcements of them came
    /// back.
    struct OwnSaves {
        let label: String
        let saves: Int
        let inMemory: Int
        let onDisk: Int
        /// Whether the observer saw every announcement; if not, the counts were taken after 10 s.
        let sawEchoes: Bool
    }

    /// 50 `save`s on a cache with memory and disk over the shared level, with `coherence`; then,
    /// once a coherent observer built after it counted 50 invalidations and 200 ms more, how many of
    /// the keys the cache's memory and disk still hold.
    static func measureOwnSaves(
        server: BenchServer,
        namespace: String,
        label: String,
        coherence: CacheCoherence?
    ) async throws -> OwnSaves {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("hoard-bench-own-\(UUID())")
        defer { try? FileManager.default.removeItem(at: folder) }
        var configuration = try RedisCacheLevel.Configuration(url: server.url)
        configuration.clientName = "hoard-bench-own"
        configuration.commandTimeout = .seconds(10)
        var builder = CacheBuilder<String>(serializer: StringSerializer())
            .containerName("own")
            .directory(folder)
            .maxRamCount(10_000)
            .sharedLevel(try RedisCacheLevel(configuration, namespace: namespace))
        if let coherence { builder = builder.coherence(coherence) }
        let cache = try builder.build()
        let observer = try instance(server, namespace, "own-observer", .invalidations)
        let saves = 50
        let keys = (0..<saves).map { "own-\($0)" }
        for key in keys { try await cache.save("saved \(key)", forKey: key) }
        let deadline = ContinuousClock.now + .seconds(10)
        while observer.statistics.invalidations < saves && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        let sawEchoes = observer.statistics.invalidations >= saves
        try await Task.sleep(for: .milliseconds(200))
        await cache.flush()
        return OwnSaves(
            label: label,
            saves: saves,
            inMemory: keys.filter { cache.entry(forKey: $0)?.level == .memory }.count,
            onDisk: cache.statistics.diskCount,
            sawEchoes: sawEchoes
        )
    }
}
