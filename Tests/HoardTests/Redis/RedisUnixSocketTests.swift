import Foundation
import HoardTestSupport
import Testing

@testable import Hoard
@testable import HoardRedis

/// `unix:///path` and ``RedisCacheLevel/Configuration/socketPath``: the level reaches a server
/// through its Unix-domain socket with everything TCP has (the login, the database, coherence), and a
/// socket nobody listens on is a miss, never a hang.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason), .timeLimit(.minutes(10)))
struct RedisUnixSocketTests {
    init() { TestLog.install() }

    /// A server of the test's own that listens on 127.0.0.1 and on a socket in `folder`.
    private static func server(
        in folder: TemporaryDirectory,
        _ lines: [String] = []
    ) throws -> (RedisTestServer, String) {
        let socket = folder.url.appendingPathComponent("redis.sock").path
        let server = try RedisTestServer.start(configuration: ["unixsocket \(socket)", "unixsocketperm 700"] + lines)
        return (server, socket)
    }

    @Test func unixURLsNameASocketAndItsDatabase() throws {
        let plain = try RedisCacheLevel.Configuration(url: "unix:///run/redis/redis.sock")
        #expect(plain.socketPath == "/run/redis/redis.sock")
        #expect(plain.database == 0)
        #expect(plain.server == "/run/redis/redis.sock")
        let withDatabase = try RedisCacheLevel.Configuration(url: "UNIX:///tmp/r.sock?db=3")
        #expect(withDatabase.socketPath == "/tmp/r.sock")
        #expect(withDatabase.database == 3)
        #expect(try RedisCacheLevel.Configuration(url: "redis://127.0.0.1:6379").socketPath == nil)
        for bad in [
            "unix://", "unix://host/tmp/r.sock", "unix:relative.sock", "unix:///tmp/r.sock?db=x",
            "unix:///tmp/r.sock?timeout=3",
        ] {
            #expect(throws: CacheError.invalidConfiguration, "\(bad)") { try RedisCacheLevel.Configuration(url: bad) }
        }
        let tooLong = "/tmp/" + String(repeating: "s", count: SocketAddress.longestSocketPath)
        #expect(throws: CacheError.invalidConfiguration) {
            try RedisCacheLevel(RedisCacheLevel.Configuration(socketPath: tooLong), namespace: "n")
        }
    }

    @Test func aLevelOnTheSocketLogsInAndSeesWhatTCPWrote() async throws {
        _ = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let (server, socket) = try Self.server(in: folder, ["requirepass s3cret", "databases 4"])
        var configuration = RedisCacheLevel.Configuration(socketPath: socket, password: "s3cret", database: 2)
        configuration.connectTimeout = .seconds(10)
        configuration.commandTimeout = .seconds(10)
        let overSocket = try RedisCacheLevel(configuration, namespace: "unix")
        let overTCP = try RedisCacheLevel.patient(url: "redis://:s3cret@127.0.0.1:\(server.port)/2", namespace: "unix")
        try await overTCP.set(Data("by tcp".utf8), forKey: "a")
        #expect(try await overSocket.get("a") == Data("by tcp".utf8))
        try await overSocket.set(Data("by socket".utf8), forKey: "b")
        #expect(try await overTCP.get("b") == Data("by socket".utf8))
        // The socket's connections are the server's `unix` clients, in database 2.
        let clients = try await overTCP.send(RESPCommand("CLIENT", ["LIST"])).bytes ?? Data()
        let lines = String(decoding: clients, as: UTF8.self).split(separator: "\n")
        #expect(lines.contains { $0.contains("addr=\(socket)") || $0.contains("laddr=\(socket)") })
        let wrong = try RedisCacheLevel(
            RedisCacheLevel.Configuration(socketPath: socket, password: "nope"),
            namespace: "u"
        )
        await #expect(throws: CacheError.self) { try await wrong.get("a") }
    }

    @Test func aCoherentCacheOnTheSocketDropsItsCopyWhenTCPChangesTheKey() async throws {
        _ = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let (server, socket) = try Self.server(in: folder)
        let namespace = "unix-\(UUID().uuidString)"
        var configuration = try RedisCacheLevel.Configuration(url: "unix://\(socket)")
        configuration.connectTimeout = .seconds(10)
        configuration.commandTimeout = .seconds(10)
        configuration.clientName = "unix-\(UUID().uuidString.prefix(8))"
        // A loaded run must not count the tracking connection lost: that drops the copy looked at.
        configuration.trackingPingTimeout = .seconds(600)
        let reader = try folder.stringBuilder("reader")
            .sharedLevel(try RedisCacheLevel(configuration, namespace: namespace))
            .coherence(.invalidations(maxLocalAge: .seconds(86_400)))
            .build()
        let writer = try RedisCoherenceTests.coherentCache(
            folder,
            "writer",
            port: server.port,
            namespace: namespace,
            clientName: "tcp-\(UUID().uuidString.prefix(8))"
        )
        #expect(await waitUntil { reader.isCoherent && writer.isCoherent })
        try await RedisCoherenceTests.save("old", forKey: "k", on: writer, heardBy: reader)
        #expect(try await reader.getOrFetch(forKey: "k") == "old")
        #expect(reader.memory?.peek("k")?.value == "old")
        try await writer.save("new", forKey: "k")
        #expect(await waitUntil { reader.memory?.peek("k")?.value != "old" })
        #expect(try await reader.getOrFetch(forKey: "k") == "new")
    }

    @Test func aSocketNobodyListensOnIsAMissNotAHang() async throws {
        let folder = TemporaryDirectory()
        let missing = folder.url.appendingPathComponent("nobody.sock").path
        var configuration = RedisCacheLevel.Configuration(socketPath: missing)
        configuration.connectTimeout = .seconds(2)
        configuration.commandTimeout = .seconds(2)
        let level = try RedisCacheLevel(configuration, namespace: "n")
        await #expect(throws: CacheError.self) { try await level.get("k") }
        let cache = try folder.stringBuilder().sharedLevel(level).fetcher { "origin \($0)" }.build()
        #expect(try await cache.getOrFetch(forKey: "k") == "origin k")
    }
}
