import Foundation
import Testing

@testable import Hoard
@testable import HoardRedis

/// The pieces of the cluster level that need no server: key slots, the slot map a node describes,
/// redirections, the lease's slot, and the settings.
struct ClusterRoutingTests {
    typealias Endpoint = RedisCacheLevel.Configuration.Endpoint

    @Test func slotsAreRedisClusterCRC16WithHashTags() {
        #expect(ClusterSlot.crc16(Array("123456789".utf8)) == 0x31C3)
        // Figures from Redis's own `CLUSTER KEYSLOT`.
        #expect(ClusterSlot.of(Array("foo".utf8)) == 12_182)
        #expect(ClusterSlot.of(Array("bar".utf8)) == 5_061)
        #expect(ClusterSlot.of(Array("{user1000}.following".utf8)) == ClusterSlot.of(Array("user1000".utf8)))
        #expect(ClusterSlot.of(Array("foo{}{bar}".utf8)) == ClusterSlot.of(Array("foo{}{bar}".utf8)))
        #expect(ClusterSlot.of(Array("foo{}{bar}".utf8)) != ClusterSlot.of(Array("bar".utf8)))
        #expect(ClusterSlot.of(Array("foo{{bar}}zap".utf8)) == ClusterSlot.of(Array("{bar".utf8)))
        #expect(ClusterSlot.of(Array("foo{bar}{zap}".utf8)) == ClusterSlot.of(Array("bar".utf8)))
        #expect(ClusterSlot.of(Array("{".utf8)) == Int(ClusterSlot.crc16(Array("{".utf8)) & 0x3FFF))
        #expect(ClusterSlot.of(Data("foo".utf8)) == 12_182)
    }

    @Test func everySlotHasATagThatHashesToIt() {
        #expect(ClusterSlot.tags.count == ClusterSlot.count)
        for (slot, tag) in ClusterSlot.tags.enumerated() {
            #expect(!tag.isEmpty && !tag.contains("{") && !tag.contains("}"))
            #expect(ClusterSlot.of(Array("x{\(tag)}y".utf8)) == slot)
        }
    }

    @Test func aLeaseIsInItsValuesSlot() throws {
        for namespace in ["users", "a}b", "caf\u{E9}", "{users}", "x{y}z"] {
            let level = try RedisCacheLevel(cluster: ["redis://127.0.0.1:1"], namespace: namespace)
            for key in ["k", "{tag}k", "k}", "{", "e\u{301}", "a{b}c", ""] {
                #expect(
                    ClusterSlot.of(level.leaseKey(key)) == ClusterSlot.of(level.storedKey(key)),
                    "\(namespace) \(key)"
                )
                #expect(level.leaseKey(key).starts(with: level.storedKey("")))
                #expect(level.leaseKey(key)[level.storedKey("").count] == RedisCacheLevel.leaseMark)
            }
        }
        // A tag opened in the namespace and closed in a key would split a value from its lease.
        for namespace in ["{users", "a{}b", "{"] {
            #expect(throws: CacheError.self) {
                try RedisCacheLevel(cluster: ["redis://127.0.0.1:1"], namespace: namespace)
            }
        }
        // One server has no slots: any namespace will do there.
        _ = try RedisCacheLevel(url: "redis://127.0.0.1:1", namespace: "{users")
    }

    @Test func shardsRepliesGiveEachSlotItsPrimary() throws {
        func node(
            _ ip: String,
            _ port: Int64,
            _ role: String,
            health: String = "online",
            tls: Int64? = nil
        ) -> RESPValue {
            var fields: [RESPValue] = [
                .bulkString(Data("id".utf8)), .bulkString(Data("abc".utf8)),
                .bulkString(Data("port".utf8)), .integer(port),
                .bulkString(Data("ip".utf8)), .bulkString(Data(ip.utf8)),
                .bulkString(Data("endpoint".utf8)), .bulkString(Data(ip.utf8)),
                .bulkString(Data("role".utf8)), .bulkString(Data(role.utf8)),
                .bulkString(Data("health".utf8)), .bulkString(Data(health.utf8)),
            ]
            if let tls { fields += [.bulkString(Data("tls-port".utf8)), .integer(tls)] }
            return .map(fields)
        }
        func shard(_ slots: [Int64], _ nodes: [RESPValue]) -> RESPValue {
            .map([
                .bulkString(Data("slots".utf8)), .array(slots.map { .integer($0) }),
                .bulkString(Data("nodes".utf8)), .array(nodes),
            ])
        }
        let reply = RESPValue.array([
            shard([0, 5460], [node("10.0.0.1", 7001, "master", tls: 8001), node("10.0.0.4", 7004, "replica")]),
            shard([5461, 10922, 16000, 16383], [node("10.0.0.2", 7002, "master")]),
            // A failed primary and its promoted replica: the replica serves.
            shard([10923, 15999], [node("10.0.0.3", 7003, "master", health: "failed"), node("?", 7006, "master")]),
        ])
        let asked = Endpoint(host: "10.0.0.9", port: 7009)
        let topology = try #require(ClusterTopology.fromShards(reply, askedNode: asked, tls: false))
        #expect(topology.ownedSlots == ClusterSlot.count)
        #expect(topology.shard(forSlot: 0)?.primary == Endpoint(host: "10.0.0.1", port: 7001))
        #expect(topology.shard(forSlot: 0)?.replicas == [Endpoint(host: "10.0.0.4", port: 7004)])
        #expect(topology.shard(forSlot: 16_383)?.primary == Endpoint(host: "10.0.0.2", port: 7002))
        #expect(topology.shard(forSlot: 12_000)?.primary == Endpoint(host: "10.0.0.9", port: 7006))
        let secure = try #require(ClusterTopology.fromShards(reply, askedNode: asked, tls: true))
        #expect(secure.shard(forSlot: 0)?.primary == Endpoint(host: "10.0.0.1", port: 8001))
        #expect(ClusterTopology.fromShards(.integer(1), askedNode: asked, tls: false) == nil)

        let slots = RESPValue.array([
            .array([.integer(0), .integer(8191), .array([.bulkString(Data("".utf8)), .integer(7001)])]),
            .array([
                .integer(8192), .integer(16383), .array([.bulkString(Data("10.0.0.2".utf8)), .integer(7002)]),
                .array([.bulkString(Data("10.0.0.5".utf8)), .integer(7005)]),
            ]),
        ])
        let old = try #require(ClusterTopology.fromSlots(slots, askedNode: asked))
        #expect(old.ownedSlots == ClusterSlot.count)
        #expect(old.shard(forSlot: 1)?.primary == Endpoint(host: "10.0.0.9", port: 7001))
        #expect(old.shard(forSlot: 9000)?.replicas == [Endpoint(host: "10.0.0.5", port: 7005)])
    }

    @Test func redirectionsNameTheirSlotAndNode() {
        let asked = Endpoint(host: "10.0.0.9", port: 7009)
        let moved = ClusterRedirection("MOVED 3999 127.0.0.1:6381", from: asked)
        #expect(moved?.kind == .moved && moved?.slot == 3999)
        #expect(moved?.endpoint == Endpoint(host: "127.0.0.1", port: 6381))
        #expect(ClusterRedirection("ASK 12 :6380", from: asked)?.endpoint == Endpoint(host: "10.0.0.9", port: 6380))
        #expect(ClusterRedirection("ASK 12 [::1]:6380", from: asked)?.endpoint == Endpoint(host: "::1", port: 6380))
        #expect(ClusterRedirection("ASK 12 :6380", from: asked)?.kind == .ask)
        #expect(ClusterRedirection("MOVED 16384 a:1", from: asked) == nil)
        #expect(ClusterRedirection("ERR MOVED", from: asked) == nil)
        #expect(ClusterRedirection("TRYAGAIN Multiple keys request during rehashing of slot", from: asked) == nil)
    }

    @Test func clusterSettingsAreChecked() throws {
        let configuration = try RedisCacheLevel.Configuration(cluster: [
            "redis://user:secret@10.0.0.1:7001", "redis://10.0.0.2:7002",
        ])
        #expect(
            configuration.cluster?.seeds == [
                Endpoint(host: "10.0.0.1", port: 7001), Endpoint(host: "10.0.0.2", port: 7002),
            ]
        )
        #expect(configuration.username == "user" && configuration.password == "secret")
        #expect(configuration.server.contains("10.0.0.2:7002"))
        // A login given once serves every node; two different ones are an error.
        #expect(try RedisCacheLevel.Configuration(cluster: ["redis://a:1", "redis://:pw@b:2"]).password == "pw")
        for urls in [
            [], ["redis://a:1/2"], ["redis://a:1", "rediss://b:2"], ["unix:///tmp/redis.sock"],
            ["redis://:one@a:1", "redis://:two@b:2"], ["redis://u:pw@a:1", "redis://v:pw@b:2"],
        ] {
            #expect(throws: CacheError.self, "\(urls)") { try RedisCacheLevel.Configuration(cluster: urls) }
        }
        var bad = configuration
        bad.cluster?.maximumRedirections = 0
        #expect(throws: CacheError.self) { try RedisCacheLevel(bad, namespace: "n") }
        bad = configuration
        bad.sentinel = .init(sentinels: [.init(host: "a", port: 1)], primaryName: "p")
        #expect(throws: CacheError.self) { try RedisCacheLevel(bad, namespace: "n") }
    }
}
