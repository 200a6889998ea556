import Foundation
import Testing

@testable import Hoard
@testable import HoardRedis

/// The test infrastructure for Redis Cluster (``RedisTestCluster``) does what the cluster tests rely
/// on: its key slots are Redis's, a started cluster serves every slot, and its migrations and
/// failovers end in the state they promise.
///
/// Serialized: six servers per test are plenty for two cores.
@Suite(
    .enabled(if: RedisTestCluster.isEnabled, RedisTestCluster.unavailableReason),
    .serialized,
    .timeLimit(.minutes(10))
)
struct RedisTestClusterTests {
    init() { TestLog.install() }

    @Test func crc16AndSlotsMatchTheSpecificationsExamples() {
        #expect(RedisTestCluster.crc16(Array("123456789".utf8)) == 0x31C3)
        #expect(RedisTestCluster.crc16([]) == 0)
        // The examples of the `CLUSTER KEYSLOT` documentation.
        #expect(RedisTestCluster.slot(of: "somekey") == 11_058)
        #expect(RedisTestCluster.slot(of: "foo{hash_tag}") == 2_515)
        #expect(RedisTestCluster.slot(of: "bar{hash_tag}") == 2_515)
        #expect(RedisTestCluster.slot(of: "{user1000}.following") == RedisTestCluster.slot(of: "{user1000}.followers"))
        #expect(RedisTestCluster.slot(of: "{}x") != RedisTestCluster.slot(of: "{}y"))
    }

    @Test func slotsAgreeWithClusterKeyslot() async throws {
        let node = try RedisTestCluster.startNode()
        let level = try RedisCacheLevel.patient(url: node.url, namespace: "cluster", poolSize: 1)
        let keys: [[UInt8]] =
            [
                "", "a", "foo", "123456789", "somekey", "{user1000}.following", "{user1000}.followers",
                "foo{hash_tag}", "{hash_tag}bar", "{}", "{}abc", "abc{}", "{}{abc}", "{abc", "abc{", "abc}",
                "}abc{def}", "{a}{b}", "{{a}}", "a{b}c{d}", "{ }", "{}}", "{{}", "x{y", "héllo", "{héllo}x",
                "日本語{キー}", "🗝️{🔑}", "a\u{0}b", "{\u{0}}",
                String(repeating: "long-key-", count: 120),
            ].map { Array($0.utf8) } + [
                // Not UTF-8: high bytes, a NUL, and `{a}` around them.
                [0xFF, 0xFE, 0x00, 0x7B, 0x61, 0x7D],
                [0x7B, 0xFF, 0x7D, 0x80],
                [0x80, 0x7B, 0x7D, 0xC3],
                [0x00],
            ] + (0..<12).map { Array("key:\($0 * 7_919)".utf8) }
        #expect(keys.count >= 40)
        for key in keys {
            var command = RESPCommand("CLUSTER", arguments: 2)
            command.append("KEYSLOT".utf8)
            command.append(key)
            let reply = try await level.send(command)
            guard case .integer(let slot) = reply else {
                Issue.record("CLUSTER KEYSLOT answered \(reply)")
                continue
            }
            #expect(Int(slot) == RedisTestCluster.slot(of: key), "key \(key)")
        }
    }

    @Test func aStartedClusterServesEverySlotWithAReplicaPerPrimary() async throws {
        let cluster = try await RedisTestCluster.start(primaries: 3, replicasPerPrimary: 1)
        #expect(cluster.nodes.count == 6)
        #expect(Set(cluster.seedURLs).count == 6)
        let primaries = try await cluster.primaries
        let replicas = try await cluster.replicas
        #expect(primaries.count == 3)
        #expect(replicas.count == 3)
        #expect(primaries.reduce(0) { $0 + $1.slotCount } == RedisTestCluster.slotCount)
        #expect(Set(replicas.compactMap(\.primaryID)) == Set(primaries.map(\.id)))
        // Every node's own `CLUSTER SLOTS`, which the cluster's checks do not read, says the same:
        // the ranges cover 0…16383 once each, with a primary and its replica.
        for node in cluster.nodes {
            let info = RedisTestCluster.fields(try await cluster.text(["CLUSTER", "INFO"], on: node))
            #expect(info["cluster_state"] == "ok")
            #expect(info["cluster_slots_ok"] == "16384")
            let ranges = try await cluster.slotRanges(on: node)
            #expect(ranges.first?.slots.lowerBound == 0)
            #expect(ranges.last?.slots.upperBound == RedisTestCluster.slotCount - 1)
            for (range, next) in zip(ranges, ranges.dropFirst()) {
                #expect(range.slots.upperBound + 1 == next.slots.lowerBound, "\(range) \(next)")
            }
            for range in ranges {
                let primary = try #require(primaries.first { $0.port == range.ports.first })
                let replica = try #require(replicas.first { $0.primaryID == primary.id })
                #expect(range.ports == [primary.port, replica.port], "\(range)")
                #expect(primary.serves(slot: range.slots.lowerBound) && primary.serves(slot: range.slots.upperBound))
            }
        }
        for slot in [0, 5_000, RedisTestCluster.slotCount - 1] {
            let owner = try await cluster.node(forSlot: slot)
            #expect(primaries.first { $0.serves(slot: slot) }?.port == owner.port)
        }
    }

    @Test func aHandMigrationMovesASlotWithItsKeysAndAsksMidWay() async throws {
        let cluster = try await RedisTestCluster.start()
        let keys =
            (0..<250).map { Array("{moving}:\($0)".utf8) } + [
                Array("{moving}:ключ".utf8), [0x7B] + Array("moving}".utf8) + [0xFF],
            ]
        let slot = RedisTestCluster.slot(of: "moving")
        #expect(keys.allSatisfy { cluster.slot(of: $0) == slot })
        let source = try await cluster.node(forSlot: slot)
        let destination = try cluster.server(try #require(try await cluster.primaries.first { $0.port != source.port }))
        for (index, key) in keys.enumerated() {
            _ = try await cluster.send("SET", [key, Array("value \(index)".utf8)], to: source)
        }

        let migration = try await cluster.startMigration(slot: slot, from: source, to: destination, movingKeys: 100)
        #expect(migration.movedKeys.count == 100)
        let sourceView = try RedisTestCluster.View(parsing: try await cluster.text(["CLUSTER", "NODES"], on: source))
        let destinationView = try RedisTestCluster.View(
            parsing: try await cluster.text(["CLUSTER", "NODES"], on: destination)
        )
        #expect(sourceView.myself?.migrating[slot] == migration.destinationID)
        #expect(destinationView.myself?.importing[slot] == migration.sourceID)
        let count = ["CLUSTER", "COUNTKEYSINSLOT", String(slot)]
        #expect(try await cluster.integer(count, on: destination) == 100)
        #expect(try await cluster.integer(count, on: source) == keys.count - 100)
        // The source sends a client asking for a moved key to the destination, for this one
        // request; a key it still holds, it answers.
        let moved = try #require(migration.movedKeys.first)
        let redirection = await Self.redirection(of: ["GET"], moved, on: source, cluster)
        #expect(redirection == RedisTestCluster.Redirection(.ask, slot: slot, port: destination.port))
        let kept = try #require(keys.first { !migration.movedKeys.contains($0) })
        let keptIndex = try #require(keys.firstIndex(of: kept))
        #expect(try await cluster.send("GET", [kept], to: source).bytes == Data("value \(keptIndex)".utf8))
        // Without `ASKING`, the destination sends the client back to the slot's owner.
        let back = await Self.redirection(of: ["GET"], moved, on: destination, cluster)
        #expect(back == RedisTestCluster.Redirection(.moved, slot: slot, port: source.port))

        try await cluster.finishMigration(migration)
        #expect(try await cluster.node(forSlot: slot).port == destination.port)
        #expect(try await cluster.integer(count, on: source) == 0)
        for (index, key) in keys.enumerated() {
            #expect(try await cluster.send("GET", [key], to: destination).bytes == Data("value \(index)".utf8))
        }
        let now = await Self.redirection(of: ["GET"], moved, on: source, cluster)
        #expect(now == RedisTestCluster.Redirection(.moved, slot: slot, port: destination.port))

        // And back in one go.
        try await cluster.migrate(slot: slot, from: destination, to: source)
        #expect(try await cluster.node(forSlot: slot).port == source.port)
        #expect(try await cluster.integer(count, on: source) == keys.count)
        #expect(try await cluster.send("GET", [moved], to: source).bytes != nil)
    }

    @Test func aManualFailoverPromotesTheReplicaEverywhere() async throws {
        let cluster = try await RedisTestCluster.start()
        let replica = try #require(try await cluster.replicas.first)
        let primary = try #require(try await cluster.primaries.first { $0.id == replica.primaryID })
        let key = Self.key("failover", servedBy: primary)
        _ = try await cluster.send(["SET", key, "before"], to: try cluster.server(primary))
        #expect(try await cluster.integer(["WAIT", "1", "10000"], on: try cluster.server(primary)) == 1)

        try await cluster.failover(replica: try cluster.server(replica))

        let primaries = try await cluster.primaries
        let promoted = try #require(primaries.first { $0.id == replica.id })
        #expect(promoted.slots == primary.slots)
        #expect(!primaries.contains { $0.id == primary.id })
        #expect(try await cluster.replicas.first { $0.id == primary.id }?.primaryID == replica.id)
        for node in cluster.nodes {
            let view = try RedisTestCluster.View(parsing: try await cluster.text(["CLUSTER", "NODES"], on: node))
            #expect(view.node(id: replica.id)?.isPrimary == true, "as \(node.port) sees it")
            #expect(view.node(id: primary.id)?.primaryID == replica.id, "as \(node.port) sees it")
        }
        let server = try cluster.server(promoted)
        #expect(try await cluster.text(["GET", key], on: server) == "before")
        #expect(try await cluster.node(forSlot: RedisTestCluster.slot(of: key)).port == promoted.port)
    }

    @Test func aKilledPrimaryIsReplacedByItsReplica() async throws {
        let cluster = try await RedisTestCluster.start()
        let primary = try #require(try await cluster.primaries.first)
        let replica = try #require(try await cluster.replicas.first { $0.primaryID == primary.id })
        let key = Self.key("kill", servedBy: primary)
        let victim = try cluster.server(primary)
        _ = try await cluster.send(["SET", key, "kept"], to: victim)
        #expect(try await cluster.integer(["WAIT", "1", "10000"], on: victim) == 1)

        cluster.kill(victim)
        await #expect(throws: (any Error).self) { try await cluster.send(["PING"], to: victim) }
        let successor = try await cluster.waitForFailover(of: victim.port)

        #expect(successor.id == replica.id)
        #expect(successor.slots == primary.slots)
        let primaries = try await cluster.primaries
        #expect(primaries.count == 3)
        #expect(!primaries.contains { $0.port == victim.port })
        #expect(primaries.reduce(0) { $0 + $1.slotCount } == RedisTestCluster.slotCount)
        for node in cluster.liveNodes {
            let info = RedisTestCluster.fields(try await cluster.text(["CLUSTER", "INFO"], on: node))
            #expect(info["cluster_state"] == "ok", "as \(node.port) sees it")
            let view = try RedisTestCluster.View(parsing: try await cluster.text(["CLUSTER", "NODES"], on: node))
            #expect(view.node(id: primary.id)?.flags.contains("fail") == true, "as \(node.port) sees it")
        }
        #expect(try await cluster.text(["GET", key], on: try cluster.server(successor)) == "kept")
    }

    @Test func aReshardUnderReadsLosesNoKey() async throws {
        let cluster = try await RedisTestCluster.start()
        let primaries = try await cluster.primaries
        let from = try #require(primaries.first)
        let to = try #require(primaries.last)
        // Keys in the lowest and the highest slots of the source, where `redis-cli` takes slots from.
        let lowest = from.slots.first?.lowerBound ?? 0
        let highest = from.slots.last?.upperBound ?? 0
        let keys = (0..<20_000).map { "reshard:\($0)" }.filter {
            let slot = RedisTestCluster.slot(of: $0)
            return from.serves(slot: slot) && (slot < lowest + 150 || slot > highest - 150)
        }
        #expect(keys.count > 100)
        let source = try cluster.server(from)
        let target = try cluster.server(to)
        for key in keys { _ = try await cluster.send(["SET", key, key], to: source) }

        let isFinished = Locked(false)
        let resharding = Task {
            defer { isFinished.withLock { $0 = true } }
            try await cluster.reshard(count: 100, from: source, to: target)
        }
        // Meanwhile the source answers each key, or sends the client where it went; it never
        // answers that a key is missing.
        var reads = 0
        while !isFinished.withLock({ $0 }) {
            for key in keys {
                do {
                    let reply = try await cluster.send(["GET", key], to: source)
                    #expect(reply.bytes == Data(key.utf8), "\(key)")
                } catch {
                    #expect(RedisTestCluster.Redirection(error) != nil, "\(error)")
                }
                reads += 1
            }
        }
        try await resharding.value
        #expect(reads >= keys.count)

        let after = try await cluster.primaries
        #expect(after.first { $0.id == from.id }?.slotCount == from.slotCount - 100)
        #expect(after.first { $0.id == to.id }?.slotCount == to.slotCount + 100)
        var movedKeys = 0
        for key in keys {
            let slot = RedisTestCluster.slot(of: key)
            let owner = try await cluster.node(forSlot: slot)
            #expect(try await cluster.text(["GET", key], on: owner) == key)
            if owner.port != source.port {
                movedKeys += 1
                #expect(owner.port == target.port)
                let redirection = await Self.redirection(of: ["GET"], Array(key.utf8), on: source, cluster)
                #expect(redirection == RedisTestCluster.Redirection(.moved, slot: slot, port: target.port))
            }
        }
        #expect(movedKeys > 0)
    }

    // MARK: - Helpers

    /// A key whose slot `node` serves.
    static func key(_ prefix: String, servedBy node: RedisTestCluster.Node) -> String {
        var index = 0
        while !node.serves(slot: RedisTestCluster.slot(of: "\(prefix):\(index)")) { index += 1 }
        return "\(prefix):\(index)"
    }

    /// The redirection `node` answers a command on `key` with, or `nil` for any other answer.
    static func redirection(
        of command: [String],
        _ key: [UInt8],
        on node: RedisTestServer,
        _ cluster: RedisTestCluster
    ) async -> RedisTestCluster.Redirection? {
        do {
            _ = try await cluster.send(command[0], command.dropFirst().map { Array($0.utf8) } + [key], to: node)
            return nil
        } catch {
            return RedisTestCluster.Redirection(error)
        }
    }
}
