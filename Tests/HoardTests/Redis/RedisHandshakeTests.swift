import Foundation
import Hoard
import Testing

@testable import HoardRedis

/// Logging in: RESP3 through `HELLO`, RESP2 when `HELLO` is refused, passwords, ACL users, databases.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason))
struct RedisHandshakeTests {
    /// Stores and reads back a value, then checks that the other level (another login, another
    /// database) sees the same or not.
    private func roundTrip(_ level: RedisCacheLevel) async throws {
        try await level.set(Data("v".utf8), forKey: "k")
        #expect(try await level.get("k") == Data("v".utf8))
        try await level.removeValue(forKey: "k")
    }

    @Test func aServerThatRefusesHELLOIsSpokenToInRESP2() async throws {
        _ = try RedisTestServer.required()
        let server = try RedisTestServer.start(configuration: ["rename-command HELLO \"\"", "requirepass s3cret"])
        let level = try RedisCacheLevel.patient(url: "redis://:s3cret@127.0.0.1:\(server.port)/2", namespace: "n")
        try await roundTrip(level)
        try await level.set(Data("in 2".utf8), forKey: "db")
        // The same key in database 0 is another key: SELECT ran.
        let zero = try RedisCacheLevel.patient(url: "redis://:s3cret@127.0.0.1:\(server.port)/0", namespace: "n")
        await #expect(throws: CacheError.notFound) { try await zero.get("db") }
        #expect(try await level.get("db") == Data("in 2".utf8))
        let info = try await level.send(RESPCommand("CLIENT", ["INFO"])).bytes ?? Data()
        #expect(String(decoding: info, as: UTF8.self).contains("resp=2"))
        let wrong = try RedisCacheLevel.patient(url: "redis://:wrong@127.0.0.1:\(server.port)", namespace: "n")
        let error = await #expect(throws: CacheError.self) { try await wrong.get("k") }
        #expect(error?.code == .network)
        #expect(error?.message.contains("127.0.0.1:\(server.port)") == true)
    }

    @Test func aPasswordIsSentWithHELLOAndAWrongOneFails() async throws {
        _ = try RedisTestServer.required()
        let server = try RedisTestServer.start(configuration: ["requirepass s3cret"])
        try await roundTrip(
            try RedisCacheLevel.patient(url: "redis://:s3cret@127.0.0.1:\(server.port)", namespace: "n")
        )
        try await roundTrip(
            try RedisCacheLevel.patient(url: "redis://default:s3cret@127.0.0.1:\(server.port)/1", namespace: "n")
        )
        for url in ["redis://:nope@127.0.0.1:\(server.port)", "redis://127.0.0.1:\(server.port)"] {
            let level = try RedisCacheLevel.patient(url: url, namespace: "n")
            let error = await #expect(throws: CacheError.self) { try await level.get("k") }
            #expect(error?.code == .network, "\(url)")
        }
    }

    @Test func anACLUserLogsInAndIsHeldToItsRights() async throws {
        _ = try RedisTestServer.required()
        let server = try RedisTestServer.start(configuration: [
            "user default off",
            "user app on >app-pass ~app:* +@all",
            "user reader on >read-pass ~app:* +get +mget +pttl +ping +hello +select +scan",
        ])
        let app = try RedisCacheLevel.patient(url: "redis://app:app-pass@127.0.0.1:\(server.port)", namespace: "app")
        try await app.set(Data("v".utf8), forKey: "k")
        let reader = try RedisCacheLevel.patient(
            url: "redis://reader:read-pass@127.0.0.1:\(server.port)",
            namespace: "app"
        )
        #expect(try await reader.get("k") == Data("v".utf8))
        // A refused command is the server's error, named in the message.
        let refused = await #expect(throws: CacheError.self) { try await reader.set(Data(), forKey: "k") }
        #expect(refused?.message.contains("NOPERM") == true)
        // Outside its keys: the same.
        let outside = try RedisCacheLevel.patient(
            url: "redis://app:app-pass@127.0.0.1:\(server.port)",
            namespace: "other"
        )
        await #expect(throws: CacheError.self) { try await outside.set(Data(), forKey: "k") }
        let stranger = try RedisCacheLevel.patient(url: "redis://app:wrong@127.0.0.1:\(server.port)", namespace: "app")
        let error = await #expect(throws: CacheError.self) { try await stranger.get("k") }
        #expect(error?.message.contains("WRONGPASS") == true)
    }

    @Test func aClientNameIsSet() async throws {
        let shared = try RedisTestServer.required()
        var configuration = try RedisCacheLevel.Configuration(url: shared.url)
        configuration.clientName = "hoard-test"
        configuration.poolSize = 1
        let level = try RedisCacheLevel(configuration, namespace: "n")
        try await level.ping()
        let name = try await level.send(RESPCommand("CLIENT", ["GETNAME"]))
        #expect(name.bytes == Data("hoard-test".utf8))
        let info = try await level.send(RESPCommand("CLIENT", ["INFO"])).bytes ?? Data()
        #expect(String(decoding: info, as: UTF8.self).contains("resp=3"))
    }
}
