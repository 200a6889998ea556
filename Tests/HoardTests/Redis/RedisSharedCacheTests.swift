import Foundation
import HoardRedis
import HoardTestSupport
import Testing

@testable import Hoard

/// Caches of a fleet over one Redis server: what one instance fetched, another reads from the server.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason))
struct RedisSharedCacheTests {
    @Test func aValueOneCacheFetchedIsASharedHitForAnotherAndTheFetcherRunsOnce() async throws {
        let server = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let namespace = "fleet-\(UUID().uuidString)"
        let fetches = Counter()
        func instance(_ container: String) throws -> Cache<String> {
            try folder.stringBuilder(container)
                .sharedLevel(try RedisCacheLevel.patient(url: server.url, namespace: namespace))
                .fetcher { key in
                    _ = fetches.increment()
                    return "fetched \(key)"
                }
                .build()
        }
        let first = try instance("a")
        let second = try instance("b")
        #expect(try await first.getOrFetch(forKey: "user 1") == "fetched user 1")
        await first.flush()
        #expect(try await second.getOrFetch(forKey: "user 1") == "fetched user 1")
        #expect(fetches.value == 1)
        #expect(second.statistics.sharedHits == 1)
        #expect(first.statistics.sharedMisses == 1)

        // A removal reaches the server: the other instance's next read misses there and fetches.
        first.removeValue(forKey: "user 1")
        await first.flush()
        let third = try instance("c")
        #expect(try await third.getOrFetch(forKey: "user 1") == "fetched user 1")
        #expect(fetches.value == 2)

        // A value set (not fetched) by one instance is a shared hit for another, with no fetch.
        first.set("set by the first", forKey: "user 2", expiry: .seconds(3_600))
        await first.flush()
        #expect(try await second.getOrFetch(forKey: "user 2") == "set by the first")
        #expect(fetches.value == 2)
        #expect(second.statistics.sharedHits == 2)
    }

    @Test func aCacheWhoseServerIsDownStillServesFromTheFetcher() async throws {
        _ = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let port = try LocalHTTPServer.closedPort()
        let level = try RedisCacheLevel(
            url: "redis://127.0.0.1:\(port)",
            namespace: "down",
            connectTimeout: .milliseconds(200),
            commandTimeout: .milliseconds(200)
        )
        let cache = try folder.stringBuilder("a").sharedLevel(level).fetcher { "fetched \($0)" }.build()
        #expect(try await cache.getOrFetch(forKey: "k") == "fetched k")
        #expect(cache.statistics.sharedErrors >= 1)  // the read, and maybe already the write
        #expect(cache["k"] == "fetched k")
    }
}

/// Two processes of one fleet over one server: what either fetched, the other reads from the server.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason))
struct RedisTwoProcessFleetTests {
    @Test(.timeLimit(.minutes(10)))
    func aValueFetchedByOneProcessIsASharedHitForTheOtherAndTheFetcherRunsOnce() async throws {
        let server = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let namespace = "two-processes-\(UUID().uuidString)"
        let fetches = Counter()
        let cache = try folder.stringBuilder("parent")
            .sharedLevel(try RedisCacheLevel.patient(url: server.url, namespace: namespace))
            .fetcher { key in
                _ = fetches.increment()
                return "fetched by the parent \(key)"
            }
            .build()
        // The parent fetches one key; the child, on a container of its own, reads it and fetches another.
        #expect(try await cache.getOrFetch(forKey: "user 1") == "fetched by the parent user 1")
        await cache.flush()
        let child = try await WorkerProcess.run(
            ["fleet-get", folder.url.path, "child", server.url, namespace, "user 1", "user 2"]
        )
        #expect(child.ending == .exited(0))
        #expect(
            child.lines == [
                "value user 1=fetched by the parent user 1",
                "value user 2=fetched by the child user 2",
                "done fetches 1 sharedHits 1 sharedMisses 1",
            ]
        )
        // What the child fetched is a shared hit here: each key was fetched once in the fleet.
        #expect(try await cache.getOrFetch(forKey: "user 2") == "fetched by the child user 2")
        #expect(fetches.value == 1)
        #expect(cache.statistics.sharedHits == 1)
        withExtendedLifetime((cache, folder)) {}
    }
}
