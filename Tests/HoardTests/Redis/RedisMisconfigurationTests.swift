import Foundation
import HoardTestSupport
import Testing

@testable import Hoard
@testable import HoardRedis

/// A configuration that can never work fails `build()`, with the server's words.
///
/// A server that is merely unreachable does not. The URL's `db` parameter is honoured, and the
/// server's refusals of a command have their own error code.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason), .timeLimit(.minutes(10)))
struct RedisMisconfigurationTests {
    init() { TestLog.install() }

    @Test func aLoginOrDatabaseThatCannotWorkMakesBuildThrowWithTheServersWords() async throws {
        _ = try RedisTestServer.required()
        let server = try RedisTestServer.start(configuration: [
            "requirepass s3cret", "databases 4", "user app on >app-pass ~app:* +@all",
        ])
        let folder = TemporaryDirectory()
        let cases: [(url: String, words: String)] = [
            ("redis://:wrong@127.0.0.1:\(server.port)", "WRONGPASS"),
            ("redis://127.0.0.1:\(server.port)", "NOAUTH"),
            ("redis://nobody:app-pass@127.0.0.1:\(server.port)", "WRONGPASS"),
            ("redis://:s3cret@127.0.0.1:\(server.port)/16", "DB index"),
            ("redis://:s3cret@127.0.0.1:\(server.port)?db=7", "DB index"),
        ]
        for (index, (url, words)) in cases.enumerated() {
            let level = try RedisCacheLevel.patient(url: url, namespace: "app")
            let error = #expect(throws: CacheError.self, "\(url)") {
                try folder.stringBuilder("c\(index)").sharedLevel(level).build()
            }
            #expect(error?.code == .invalidConfiguration, "\(url)")
            #expect(error?.message.contains(words) == true, "\(url): \(error?.message ?? "")")
            // Not before the disk would have opened: nothing was made in the container.
            #expect(folder.entryFiles(in: "c\(index)").isEmpty)
        }
        // Coherent caches too: the tracking connection logs in with the same words.
        let wrong = try RedisCacheLevel.patient(url: "redis://:wrong@127.0.0.1:\(server.port)", namespace: "app")
        let coherent = #expect(throws: CacheError.self) {
            try folder.stringBuilder("coherent").sharedLevel(wrong).coherence(.invalidations).build()
        }
        #expect(coherent?.code == .invalidConfiguration)
        // The right login builds, and works.
        let right = try RedisCacheLevel.patient(url: "redis://:s3cret@127.0.0.1:\(server.port)/3", namespace: "app")
        let cache = try folder.stringBuilder("right").sharedLevel(right).build()
        try await cache.save("v", forKey: "k")
        #expect(try await right.get("k").isEmpty == false)
    }

    @Test func refusalsThatCannotPassAreToldFromThoseThatMay() {
        let permanent = [
            "the server refused the login: WRONGPASS invalid username-password pair or user is disabled.",
            "the server refused the login: NOAUTH HELLO must be called with the client already authenticated",
            "SELECT was refused: ERR DB index is out of range",
            "AUTH was refused: ERR invalid password",
            "AUTH was refused: ERR Client sent AUTH, but no password is set",
            "AUTH was refused: ERR wrong number of arguments for 'auth' command",
            "the server refused the login: DENIED Redis is running in protected mode",
            "CLIENT was refused: NOPERM this user has no permissions to run the 'client' command",
        ]
        for description in permanent {
            #expect(RedisFailure(.handshake, description).isPermanentMisconfiguration, "\(description)")
        }
        let passing = [
            RedisFailure(.handshake, "the server refused the login: ERR max number of clients reached"),
            RedisFailure(.handshake, "SELECT was refused: LOADING Redis is loading the dataset in memory"),
            RedisFailure(.timeout, "no answer to HELLO within 1 second"),
            RedisFailure(.connect, "connect failed: Connection refused (errno 111)"),
            // Not the login: a command refused once logged in is the server's answer, not its setup.
            RedisFailure(.server, "the server answered NOPERM this user has no permissions"),
        ]
        for failure in passing { #expect(!failure.isPermanentMisconfiguration, "\(failure.description)") }
    }

    @Test func aServerThatCannotBeReachedStillBuildsAndTheFetcherServes() async throws {
        _ = try RedisTestServer.required()
        // A port nothing listens on: the server is down, which may pass.
        let server = try RedisTestServer.start()
        let port = server.port
        server.kill()
        let folder = TemporaryDirectory()
        let level = try RedisCacheLevel.patient(url: "redis://127.0.0.1:\(port)", namespace: "n")
        let cache = try folder.stringBuilder().sharedLevel(level).fetcher { "fetched \($0)" }.build()
        #expect(try await cache.getOrFetch(forKey: "k") == "fetched k")
        #expect(cache.statistics.sharedErrors >= 1)
    }

    @Test func theURLsDatabaseParameterIsHonouredAndAnythingElseIsRefused() async throws {
        let server = try RedisTestServer.required()
        let byPath = try RedisCacheLevel.patient(url: "redis://127.0.0.1:\(server.port)/2", namespace: "db-param")
        let byQuery = try RedisCacheLevel.patient(url: "redis://127.0.0.1:\(server.port)?db=2", namespace: "db-param")
        let zero = try RedisCacheLevel.patient(url: "redis://127.0.0.1:\(server.port)/0", namespace: "db-param")
        #expect(byQuery.configuration.database == 2)
        let key = "k-\(UUID().uuidString)"
        try await byPath.set(Data("in 2".utf8), forKey: key)
        #expect(try await byQuery.get(key) == Data("in 2".utf8))
        await #expect(throws: CacheError.notFound) { try await zero.get(key) }
        try await byPath.removeValue(forKey: key)
        #expect(try RedisCacheLevel.Configuration(url: "redis://h/2?db=2").database == 2)
        #expect(try RedisCacheLevel.Configuration(url: "redis://h?db=3&db=3").database == 3)
        for url in [
            "redis://h?db=x", "redis://h?db=-1", "redis://h?db", "redis://h/1?db=2", "redis://h?tls=1",
            "redis://h?db=1&db=2",
        ] {
            let error = #expect(throws: CacheError.self, "\(url)") { try RedisCacheLevel.Configuration(url: url) }
            #expect(error?.code == .invalidConfiguration, "\(url)")
            #expect(error?.message.contains(url) == true, "\(url)")
        }
    }

    @Test func aCommandTheServerRefusesHasItsOwnCodeAndTheReply() async throws {
        _ = try RedisTestServer.required()
        let server = try RedisTestServer.start()
        let level = try RedisCacheLevel.patient(url: server.url, namespace: "refused")
        let admin = try RedisCacheLevel.patient(url: server.url, namespace: "admin")
        // A key of the namespace that another client made a hash.
        _ = try await admin.send(RESPCommand("HSET", ["refused:k", "field", "value"]))
        let wrongType = await #expect(throws: CacheError.self) { try await level.get("k") }
        #expect(wrongType?.code == .serverRefused)
        #expect(wrongType?.message.contains("WRONGTYPE") == true)
        // A server out of memory that evicts nothing.
        _ = try await admin.send(RESPCommand("CONFIG", ["SET", "maxmemory-policy", "noeviction"]))
        _ = try await admin.send(RESPCommand("CONFIG", ["SET", "maxmemory", "1"]))
        let outOfMemory = await #expect(throws: CacheError.self) {
            try await level.set(Data("v".utf8), forKey: "other")
        }
        #expect(outOfMemory?.code == .serverRefused)
        #expect(outOfMemory?.message.contains("OOM") == true)
        #expect(outOfMemory?.message.contains("127.0.0.1:\(server.port)") == true)
        _ = try await admin.send(RESPCommand("CONFIG", ["SET", "maxmemory", "0"]))
        // A server that is not there is still a network failure.
        server.kill()
        let down = await #expect(throws: CacheError.self) { try await level.get("k") }
        #expect(down?.code == .network)
    }
}
