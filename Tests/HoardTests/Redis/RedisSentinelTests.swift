import Foundation
import HoardTestSupport
import Testing

@testable import Hoard
@testable import HoardRedis

/// `RedisCacheLevel(sentinels:primaryName:namespace:)`, against a primary, a replica and three
/// Sentinels of the test's own: the level finds the primary, follows a failover (asked for, and
/// after the primary is killed), loses no write the old primary had passed on, and a coherent
/// cache hears the other instance's writes on the new primary.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason), .timeLimit(.minutes(10)))
struct RedisSentinelTests {
    init() { TestLog.install() }

    static let name = "hoard-primary"

    /// A primary, its replica, and three Sentinels watching them (quorum 2, down after 1 s).
    struct Group {
        var primary: RedisTestServer
        var replica: RedisTestServer
        var sentinels: [RedisTestServer]

        var urls: [String] { sentinels.map(\.url) }
    }

    static func group() throws -> Group {
        _ = try RedisTestServer.required()
        let primary = try RedisTestServer.start()
        let replica = try RedisTestServer.start(configuration: ["replicaof 127.0.0.1 \(primary.port)"])
        let sentinels = try (0..<3).map { _ in
            try RedisTestServer.start(
                configuration: [
                    "sentinel monitor \(name) 127.0.0.1 \(primary.port) 2",
                    "sentinel down-after-milliseconds \(name) 1000",
                    "sentinel failover-timeout \(name) 3000",
                ],
                sentinel: true
            )
        }
        return Group(primary: primary, replica: replica, sentinels: sentinels)
    }

    /// Whether a level logged that the Sentinels moved the primary to `server`: the port tells this
    /// test's group from the others', whose Sentinels watch a primary of the same name.
    static func heardOfTheMove(to server: RedisTestServer) -> Bool {
        !TestLog.messages(containing: "the Sentinels moved the primary \(name) to 127.0.0.1:\(server.port)").isEmpty
    }

    /// A patient level on the group's primary.
    static func level(_ group: Group, namespace: String = "sentinel") throws -> RedisCacheLevel {
        var configuration = try RedisCacheLevel.Configuration(sentinels: group.urls, primaryName: name)
        configuration.connectTimeout = .seconds(10)
        configuration.commandTimeout = .seconds(10)
        return try RedisCacheLevel(configuration, namespace: namespace)
    }

    /// The string a cache stored under `key` in `namespace`, read straight from `server`.
    static func value(
        of key: String,
        on server: RedisTestServer,
        namespace: String,
        _ folder: TemporaryDirectory
    ) async throws -> String {
        let cache = try folder.stringBuilder("check-\(UUID().uuidString.prefix(8))")
            .sharedLevel(try direct(server, namespace: namespace))
            .build()
        return try await cache.get(key)
    }

    /// A level straight to one server (a Sentinel, or a data server).
    static func direct(_ server: RedisTestServer, namespace: String = "sentinel") throws -> RedisCacheLevel {
        try RedisCacheLevel.patient(url: server.url, namespace: namespace)
    }

    /// The role `ROLE` reports for the server of `level`.
    static func role(_ level: RedisCacheLevel) async -> String? {
        guard case .array(let parts)? = try? await level.send(RESPCommand("ROLE", [])) else { return nil }
        return parts.first?.bytes.map { String(decoding: $0, as: UTF8.self) }
    }

    /// Every string in a reply, depth first.
    static func strings(_ value: RESPValue) -> [String] {
        switch value {
        case .array(let parts), .map(let parts), .push(let parts): parts.flatMap(strings)
        default: value.bytes.map { [String(decoding: $0, as: UTF8.self)] } ?? []
        }
    }

    /// Waits until every Sentinel knows the two others and the replica, in sync with the primary:
    /// before that, a failover may find no replica to promote (Sentinels learn of replicas from
    /// the primary's `INFO`, every 10 s), and the Sentinels cannot agree that a primary is down.
    static func settle(_ group: Group) async throws {
        for server in group.sentinels {
            let sentinel = try direct(server)
            let settled = await waitUntilAsync {
                guard
                    case .array(let others)? = try? await sentinel.send(RESPCommand("SENTINEL", ["SENTINELS", name])),
                    case .array(let replicas)? = try? await sentinel.send(RESPCommand("SENTINEL", ["REPLICAS", name])),
                    others.count == 2, replicas.count == 1
                else { return false }
                let fields = strings(replicas[0])
                guard let link = fields.firstIndex(of: "master-link-status"), link + 1 < fields.count,
                    let flags = fields.firstIndex(of: "flags"), flags + 1 < fields.count
                else { return false }
                return fields[link + 1] == "ok" && fields[flags + 1] == "slave"
            }
            #expect(settled, "Sentinel \(server.port) did not settle")
        }
    }

    @Test func sentinelURLsMakeAConfigurationAndBadOnesAreRefused() throws {
        let configuration = try RedisCacheLevel.Configuration(
            sentinels: ["redis://:pw@10.0.0.5:26379/2", "redis://10.0.0.6:26380"],
            primaryName: "cache"
        )
        #expect(
            configuration.sentinel
                == .init(
                    sentinels: [.init(host: "10.0.0.5", port: 26379), .init(host: "10.0.0.6", port: 26380)],
                    primaryName: "cache",
                    password: "pw"
                )
        )
        #expect(configuration.password == "pw" && configuration.database == 2)
        #expect(configuration.server.contains("cache") && configuration.server.contains("10.0.0.6:26380"))
        for (urls, name) in [([], "cache"), (["redis://a:1", "rediss://b:2"], "cache"), (["unix:///tmp/s"], "c")] {
            #expect(throws: CacheError.invalidConfiguration, "\(urls)") {
                try RedisCacheLevel(sentinels: urls, primaryName: name, namespace: "n")
            }
        }
        #expect(throws: CacheError.invalidConfiguration) {
            try RedisCacheLevel(sentinels: ["redis://a:1"], primaryName: "", namespace: "n")
        }
    }

    @Test func onlyAPrimaryPassesTheRoleCheck() {
        let server = RedisCacheLevel.Configuration.Endpoint(host: "127.0.0.1", port: 6379)
        let primary = RESPValue.array([.bulkString(Data("master".utf8)), .integer(0), .array([])])
        let replica = RESPValue.array([.bulkString(Data("slave".utf8)), .bulkString(Data("127.0.0.1".utf8))])
        #expect(ConnectionLoop.notPrimary(primary, server) == nil)
        let failure = ConnectionLoop.notPrimary(replica, server)
        #expect(failure?.kind == .connect)
        #expect(failure?.description.contains("is a slave") == true)
        #expect(ConnectionLoop.notPrimary(.integer(1), server)?.kind == .protocolViolation)
    }

    @Test func theLevelFindsThePrimaryPastASentinelThatIsDown() async throws {
        let group = try Self.group()
        var configuration = try RedisCacheLevel.Configuration(
            sentinels: ["redis://127.0.0.1:\(try LocalHTTPServer.closedPort())"] + group.urls,
            primaryName: Self.name
        )
        configuration.connectTimeout = .seconds(10)
        configuration.commandTimeout = .seconds(10)
        let level = try RedisCacheLevel(configuration, namespace: "sentinel")
        try await level.set(Data("v".utf8), forKey: "k")
        #expect(try await Self.direct(group.primary).get("k") == Data("v".utf8))
        // A name no Sentinel watches: a miss that says so, never a hang.
        var unknown = try RedisCacheLevel.Configuration(sentinels: group.urls, primaryName: "nobody")
        unknown.connectTimeout = .seconds(10)
        let error = try await #require(throws: CacheError.self) {
            try await RedisCacheLevel(unknown, namespace: "sentinel").get("k")
        }
        #expect(error.message.contains("does not know a primary named nobody"), "\(error.message)")
    }

    /// Sentinels that refuse the login for good: no address, and no passing fault either.
    @Test func sentinelsThatRefuseTheLoginFailBuildWithTheirWords() async throws {
        _ = try RedisTestServer.required()
        let primary = try RedisTestServer.start()
        let sentinel = try RedisTestServer.start(
            configuration: [
                "requirepass sentinel-s3cret", "sentinel monitor \(Self.name) 127.0.0.1 \(primary.port) 1",
            ],
            sentinel: true
        )
        let folder = TemporaryDirectory()
        var configuration = try RedisCacheLevel.Configuration(
            sentinels: ["redis://:wrong@127.0.0.1:\(sentinel.port)"],
            primaryName: Self.name
        )
        configuration.connectTimeout = .seconds(10)
        configuration.commandTimeout = .seconds(10)
        let level = try RedisCacheLevel(configuration, namespace: "sentinel")
        let error = try #require(throws: CacheError.self) {
            try folder.stringBuilder("wrong").sharedLevel(level).build()
        }
        #expect(error.code == .invalidConfiguration)
        #expect(error.message.contains("WRONGPASS"), "\(error.message)")
        withExtendedLifetime((primary, sentinel)) {}
    }

    @Test func aFailoverIsFollowedAndCoherenceHoldsThroughIt() async throws {
        let group = try Self.group()
        let folder = TemporaryDirectory()
        let namespace = "sentinel-\(UUID().uuidString)"
        func cache(_ name: String) throws -> Cache<String> {
            try folder.stringBuilder(name)
                .sharedLevel(try Self.level(group, namespace: namespace))
                .coherence(.invalidations(maxLocalAge: .seconds(86_400)))
                .build()
        }
        let reader = try cache("reader")
        let writer = try cache("writer")
        #expect(await waitUntil { reader.isCoherent && writer.isCoherent })
        try await RedisCoherenceTests.save("before", forKey: "k", on: writer, heardBy: reader)
        #expect(try await reader.getOrFetch(forKey: "k") == "before")
        // The replica has it before the failover: a failover loses nothing the replica had.
        let primary = try Self.direct(group.primary, namespace: namespace)
        _ = try await primary.send(RESPCommand("WAIT", ["1", "5000"]))

        try await Self.settle(group)
        let started = ContinuousClock.now
        // Asked of a Sentinel that is not the first the levels ask: the others hear of it later.
        let sentinel = try Self.direct(group.sentinels[1])
        #expect(try await sentinel.send(RESPCommand("SENTINEL", ["FAILOVER", Self.name])).bytes == Data("OK".utf8))
        let replicaLevel = try Self.direct(group.replica)
        #expect(await waitUntilAsync { await Self.role(replicaLevel) == "master" })
        // The levels move when they hear of it; a write before that may still land on the old
        // primary, which Redis discards when it demotes it (as for any client).
        #expect(
            await waitUntil { Self.heardOfTheMove(to: group.replica) }
        )
        #expect(await waitUntil { reader.isCoherent && writer.isCoherent })
        try await eventually { try await writer.save("after", forKey: "k") }
        print("figure: Sentinel failover: writes came back \(ContinuousClock.now - started) after SENTINEL FAILOVER")
        // The write went to the new primary, and the reader's copy of the old value is gone.
        #expect(try await Self.value(of: "k", on: group.replica, namespace: namespace, folder) == "after")
        #expect(try await eventually { try await reader.getOrFetch(forKey: "k") } == "after")
        try await RedisCoherenceTests.save("final", forKey: "k", on: writer, heardBy: reader)
        #expect(try await reader.getOrFetch(forKey: "k") == "final")
        withExtendedLifetime(group) {}
    }

    @Test func aKilledPrimaryIsReplacedAndNoAcknowledgedWriteIsLost() async throws {
        let group = try Self.group()
        let level = try Self.level(group)
        try await Self.settle(group)
        for index in 0..<50 { try await level.set(Data("value \(index)".utf8), forKey: "k\(index)") }
        _ = try await Self.direct(group.primary).send(RESPCommand("WAIT", ["1", "5000"]))

        let killed = ContinuousClock.now
        group.primary.kill()
        try await eventually { try await level.set(Data("after".utf8), forKey: "after") }
        print("figure: Sentinel failover after kill -9: writes came back \(ContinuousClock.now - killed) later")
        #expect(await Self.role(try Self.direct(group.replica)) == "master")
        for index in 0..<50 { #expect(try await level.get("k\(index)") == Data("value \(index)".utf8)) }
        #expect(try await level.get("after") == Data("after".utf8))
        withExtendedLifetime(group) {}
    }
}

extension RedisSentinelTests {
    /// A primary the Sentinels replace while this process still holds its connections (stopped
    /// with `SIGSTOP`, it cannot be told to close them): the `+switch-master` announcement moves
    /// every connection, data and tracking alike, to the new primary at once, instead of each
    /// waiting out a command timeout of a minute.
    @Test func anAnnouncedSwitchMovesConnectionsOffAPrimaryThatCannotBeToldToDropThem() async throws {
        let group = try Self.group()
        let folder = TemporaryDirectory()
        let namespace = "switch-\(UUID().uuidString)"
        func cache(_ name: String) throws -> Cache<String> {
            var configuration = try RedisCacheLevel.Configuration(sentinels: group.urls, primaryName: Self.name)
            configuration.connectTimeout = .seconds(10)
            configuration.commandTimeout = .seconds(60)
            configuration.trackingPingTimeout = .seconds(60)
            return try folder.stringBuilder(name)
                .sharedLevel(try RedisCacheLevel(configuration, namespace: namespace))
                .coherence(.invalidations(maxLocalAge: .seconds(86_400)))
                .build()
        }
        let reader = try cache("reader")
        let writer = try cache("writer")
        #expect(await waitUntil { reader.isCoherent && writer.isCoherent })
        try await RedisCoherenceTests.save("before", forKey: "k", on: writer, heardBy: reader)
        #expect(try await reader.getOrFetch(forKey: "k") == "before")
        _ = try await Self.direct(group.primary, namespace: namespace).send(RESPCommand("WAIT", ["1", "5000"]))
        try await Self.settle(group)

        group.primary.pause()
        defer { group.primary.resume() }
        let replicaLevel = try Self.direct(group.replica)
        #expect(await waitUntilAsync { await Self.role(replicaLevel) == "master" })
        #expect(
            await waitUntil { Self.heardOfTheMove(to: group.replica) }
        )
        #expect(await waitUntil { reader.isCoherent && writer.isCoherent })
        try await eventually { try await writer.save("after", forKey: "k") }
        #expect(try await Self.value(of: "k", on: group.replica, namespace: namespace, folder) == "after")
        #expect(try await eventually { try await reader.getOrFetch(forKey: "k") } == "after")
        try await RedisCoherenceTests.save("final", forKey: "k", on: writer, heardBy: reader)
        #expect(try await reader.getOrFetch(forKey: "k") == "final")
    }
}

/// The result of `body` once it stops throwing, or its last error after ten minutes.
func eventually<T>(_ body: () async throws -> T) async throws -> T {
    let deadline = ContinuousClock.now + .seconds(600)
    while true {
        do {
            return try await body()
        } catch {
            if ContinuousClock.now >= deadline { throw error }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}

/// Suspends until the asynchronous `condition` holds, asking every 20 ms; `false` after `seconds`
/// (ten minutes unless told).
func waitUntilAsync(seconds: Int = 600, _ condition: () async -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return await condition()
}
