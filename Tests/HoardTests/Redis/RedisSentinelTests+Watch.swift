import Foundation
import HoardTestSupport
import Testing

@testable import Hoard
@testable import HoardRedis

/// The watch on the Sentinels: an announcement it missed while its subscription was down, and one
/// watch for every level of a process on the same Sentinels.
extension RedisSentinelTests {
    /// The clients of `server` (a Sentinel) named `name`, as `CLIENT LIST` shows them.
    static func clients(of server: RedisTestServer, named name: String) async -> [String]? {
        guard let list = try? await direct(server).send(RESPCommand("CLIENT", ["LIST"])).bytes else { return nil }
        return String(decoding: list, as: UTF8.self).split(separator: "\n").map(String.init)
            .filter { $0.contains(" name=\(name) ") }
    }

    /// A move announced while the watch was down is followed once it subscribes again.
    ///
    /// The Sentinels replace a primary that cannot be told to drop its clients (`SIGSTOP`) while
    /// the one Sentinel the level knows is out of its reach, so that its `+switch-master` goes to
    /// no subscription of the level's. Once the Sentinel is reachable again, the watch subscribes
    /// again and asks it for the primary: the level moves to the new primary at once, instead of
    /// waiting out the command timeout of an hour on the stopped one.
    @Test func aSwitchAnnouncedWhileTheWatchWasDownIsFollowedOnceItSubscribesAgain() async throws {
        let group = try Self.group()
        try await Self.settle(group)
        let watched = group.sentinels[0]
        let proxy = try HoldingProxy(upstreamPort: watched.port)
        let name = "missed-\(UUID().uuidString.prefix(8))"
        var configuration = try RedisCacheLevel.Configuration(
            sentinels: ["redis://127.0.0.1:\(proxy.port)"],
            primaryName: Self.name
        )
        configuration.clientName = name
        configuration.connectTimeout = .seconds(5)
        // An hour: far more than the move may take in a loaded run (ThreadSanitizer on two cores).
        configuration.commandTimeout = .seconds(3_600)
        let level = try RedisCacheLevel(configuration, namespace: "sentinel")
        try await level.set(Data("before".utf8), forKey: "k")
        // The watch's subscription is up (`sub=2`: both channels) before it goes down.
        #expect(
            await waitUntilAsync {
                let watches = await Self.clients(of: watched, named: "\(name)-sentinel")
                return watches?.count == 1 && watches?[0].contains(" sub=2 ") == true
            }
        )

        proxy.refuse(true)
        #expect(await waitUntilAsync { await Self.clients(of: watched, named: "\(name)-sentinel")?.isEmpty == true })
        group.primary.pause()
        defer { group.primary.resume() }
        // The watched Sentinel names the replica: it has announced the move, to nobody here.
        let sentinel = try Self.direct(watched)
        let question = RESPCommand("SENTINEL", ["GET-MASTER-ADDR-BY-NAME", Self.name])
        #expect(
            await waitUntilAsync {
                guard case .array(let parts)? = try? await sentinel.send(question) else { return false }
                return parts.last?.bytes == Data(String(group.replica.port).utf8)
            }
        )
        proxy.refuse(false)

        // A write queued on the stopped primary would wait an hour there; it moves with its connection.
        let write = Task { try await level.set(Data("after".utf8), forKey: "k") }
        let replica = try Self.direct(group.replica)
        let moved = await waitUntilAsync(seconds: 600) { (try? await replica.get("k")) == Data("after".utf8) }
        #expect(moved, "the level did not move to the new primary within 600 s")
        if !moved { write.cancel() }
        _ = await write.result
    }

    /// Three levels on the same Sentinels share one watch: one subscription to each Sentinel, which
    /// outlives the level that opened it, comes back when cut, and goes with the last level.
    @Test func levelsOnTheSameSentinelsShareOneWatch() async throws {
        let group = try Self.group()
        let name = "shared-\(UUID().uuidString.prefix(8))"
        let watchName = "\(name)-sentinel"
        var configuration = try RedisCacheLevel.Configuration(sentinels: group.urls, primaryName: Self.name)
        configuration.clientName = name
        configuration.connectTimeout = .seconds(10)
        configuration.commandTimeout = .seconds(10)
        var levels = try (0..<3).map { try RedisCacheLevel(configuration, namespace: "shared-\($0)") }
        for level in levels { try await level.set(Data("v".utf8), forKey: "k") }
        for sentinel in group.sentinels {
            #expect(await waitUntilAsync { await Self.clients(of: sentinel, named: watchName)?.isEmpty == false })
            let watches = await Self.clients(of: sentinel, named: watchName)
            #expect(watches?.count == 1, "\(watches ?? [])")
        }

        // The level that opened the watch goes, and another: the watch stays for the third.
        levels.removeFirst(2)
        let sentinel = group.sentinels[0]
        let line = try #require(await Self.clients(of: sentinel, named: watchName)?.first)
        let id = try #require(line.split(separator: " ").first { $0.hasPrefix("id=") }?.dropFirst(3))
        _ = try await Self.direct(sentinel).send(RESPCommand("CLIENT", ["KILL", "ID", String(id)]))
        #expect(
            await waitUntilAsync {
                guard let watches = await Self.clients(of: sentinel, named: watchName) else { return false }
                return watches.count == 1 && !watches[0].hasPrefix("id=\(id) ")
            }
        )

        levels.removeAll()
        for sentinel in group.sentinels {
            #expect(await waitUntilAsync { await Self.clients(of: sentinel, named: watchName)?.isEmpty == true })
        }
    }

    /// A watch that subscribes again to a Sentinel that names the primary the connections are on
    /// leaves them alone: no reconnection when nothing moved.
    @Test func aWatchThatSubscribesAgainLeavesConnectionsOnTheSamePrimaryAlone() async throws {
        let group = try Self.group()
        let name = "same-\(UUID().uuidString.prefix(8))"
        var configuration = try RedisCacheLevel.Configuration(sentinels: group.urls, primaryName: Self.name)
        configuration.clientName = name
        configuration.connectTimeout = .seconds(10)
        configuration.commandTimeout = .seconds(10)
        let level = try RedisCacheLevel(configuration, namespace: "same")
        for index in 0..<configuration.poolSize { try await level.set(Data("v".utf8), forKey: "k\(index)") }
        func ids(_ clients: [String]?) -> Set<String> {
            Set((clients ?? []).compactMap { $0.split(separator: " ").first.map(String.init) })
        }
        let connections = ids(await Self.clients(of: group.primary, named: name))
        #expect(connections.count == configuration.poolSize)

        let sentinel = group.sentinels[0]
        let watch = ids(await Self.clients(of: sentinel, named: "\(name)-sentinel"))
        let watchID = try #require(watch.first.map { String($0.dropFirst(3)) })
        _ = try await Self.direct(sentinel).send(RESPCommand("CLIENT", ["KILL", "ID", watchID]))
        // The new subscription's first ping follows its question for the primary.
        #expect(
            await waitUntilAsync {
                guard let watches = await Self.clients(of: sentinel, named: "\(name)-sentinel"), watches.count == 1
                else { return false }
                return !watch.contains(ids(watches).first ?? "") && watches[0].contains(" cmd=ping ")
            }
        )
        #expect(ids(await Self.clients(of: group.primary, named: name)) == connections)
    }
}
