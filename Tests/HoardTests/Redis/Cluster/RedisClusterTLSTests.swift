import Foundation
import HoardTestSupport
import Testing

@testable import Hoard
@testable import HoardRedis

/// `RedisCacheLevel(cluster:namespace:)` against a real Redis Cluster (three primaries, each with a
/// replica) reached only over TLS, and against one that asks for a password: the level's TLS
/// settings and login reach every node it finds in the map, its tracking connections included, and
/// settings that cannot work fail the cache's `build()` with the node's words.
///
/// The TLS tests run in a build with TLS (on Linux, the package trait: `swift test --traits TLS`);
/// `HOARD_REQUIRE_TLS=1` makes a build without it fail them instead of skipping.
///
/// Serialized: six servers per test are plenty for two cores.
@Suite(
    .enabled(if: RedisTestCluster.isEnabled, RedisTestCluster.unavailableReason),
    .serialized,
    .timeLimit(.minutes(10))
)
struct RedisClusterTLSTests {
    init() { TestLog.install() }

    static let tlsUnavailableReason: Comment = "this build has no TLS: swift test --traits TLS"

    /// A cluster whose nodes listen only on TLS ports, with certificates made in `folder`.
    private static func tlsCluster(in folder: TemporaryDirectory) async throws -> RedisTestCluster {
        try #require(RedisCacheLevel.Configuration.TLS.isAvailable, tlsUnavailableReason)
        let certificates = try await TLSCertificates.make(in: folder.url)
        return try await RedisTestCluster.start(tls: certificates)
    }

    /// A patient level on the cluster's first two nodes, at `urls` (the cluster's own by default).
    private static func level(
        _ cluster: RedisTestCluster,
        urls: [String]? = nil,
        authority: String? = nil,
        namespace: String
    ) throws -> RedisCacheLevel {
        var configuration = try RedisCacheLevel.Configuration(cluster: urls ?? Array(cluster.seedURLs.prefix(2)))
        configuration.tls?.certificateAuthorityFile = authority ?? cluster.certificates?.authority
        configuration.connectTimeout = .seconds(10)
        configuration.commandTimeout = .seconds(10)
        return try RedisCacheLevel(configuration, namespace: namespace)
    }

    /// Sets `count` keys through `level`, checks that they spread over every primary, over many
    /// slots, and read back one by one and in one batch; then removes them all.
    private static func checkKeysOverEveryPrimary(
        _ level: RedisCacheLevel,
        _ cluster: RedisTestCluster,
        namespace: String,
        count: Int = 300
    ) async throws {
        let keys = (0..<count).map { "key-\($0)" }
        for key in keys { try await level.set(Data(key.utf8), forKey: key) }
        let counts = try await RedisClusterTests.keysPerPrimary(cluster, namespace: namespace)
        #expect(counts.count == 3 && counts.allSatisfy { $0 > count / 6 }, "\(counts)")
        #expect(counts.reduce(0, +) == count, "\(counts)")
        for key in keys.prefix(30) { #expect(try await level.get(key) == Data(key.utf8)) }
        let slots = Set(keys.map { RedisTestCluster.slot(of: level.storedKey($0)) })
        #expect(slots.count > count * 9 / 10, "\(slots.count) slots")
        let asked = keys.reversed() + ["missing-1", "missing-2"]
        let values = try await level.values(forKeys: Array(asked))
        #expect(values == asked.map { $0.hasPrefix("missing") ? nil : Data($0.utf8) })
        try await level.removeAll()
        #expect(try await RedisClusterTests.keysPerPrimary(cluster, namespace: namespace) == [0, 0, 0])
        await #expect(throws: CacheError.notFound(key: keys[0])) { try await level.get(keys[0]) }
    }

    /// Two coherent caches on the cluster: for keys on every primary, a write through one drops the
    /// other's copy, and the other's next read is the new value.
    private static func checkCoherence(_ cluster: RedisTestCluster, namespace: String) async throws {
        let folder = TemporaryDirectory()
        let writer = try RedisClusterTests.coherentCache(folder, "a", cluster, namespace: namespace)
        let reader = try RedisClusterTests.coherentCache(folder, "b", cluster, namespace: namespace)
        #expect(await waitUntil { writer.isCoherent && reader.isCoherent })
        let keys = (0..<30).map { "k\($0)" }
        let probe = try Self.level(cluster, namespace: namespace)
        var owners: Set<UInt16> = []
        for key in keys { owners.insert(try await cluster.node(forSlot: ClusterSlot.of(probe.storedKey(key))).port) }
        #expect(owners.count == 3, "the keys are on \(owners)")
        for key in keys {
            try await RedisCoherenceTests.save("old", forKey: key, on: writer, heardBy: reader)
            #expect(try await reader.getOrFetch(forKey: key) == "old")
        }
        for key in keys {
            try await writer.save("new", forKey: key)
            #expect(await waitUntil { reader.memory?.peek(key)?.value != "old" }, "\(key)")
            #expect(try await reader.getOrFetch(forKey: key) == "new")
        }
    }

    // MARK: - TLS

    @Test(.enabled(if: TLSCertificates.isEnabled, tlsUnavailableReason))
    func keysBatchesAndRemovalsReachEveryPrimaryOverTLSOnly() async throws {
        let folder = TemporaryDirectory()
        let cluster = try await Self.tlsCluster(in: folder)
        // No node has a plain port: whatever the level reached, it reached over TLS.
        for node in cluster.nodes {
            #expect(try await cluster.setting("port", on: node) == "0")
            #expect(try await cluster.setting("tls-port", on: node) == String(node.port))
        }
        #expect(cluster.seedURLs.allSatisfy { $0.hasPrefix("rediss://127.0.0.1:") })
        // A fixed namespace on a cluster of its own: a random one made the keys' slots, through
        // CRC-16's linearity, collide more in about one run in a hundred (244 of 300 once).
        let namespace = "tls-keys"
        let level = try Self.level(cluster, namespace: namespace)
        try await Self.checkKeysOverEveryPrimary(level, cluster, namespace: namespace)
        // The map the level follows names the nodes' TLS ports (`tls-port` of `CLUSTER SHARDS`).
        let topology = try #require(level.nodes.router?.topology)
        let primaries = Set(try await cluster.primaries.map { Int($0.port) })
        #expect(Set(topology.shards.map(\.primary.port)) == primaries)
        #expect(
            Set(topology.shards.flatMap(\.replicas).map(\.port))
                == Set(try await cluster.replicas.map { Int($0.port) })
        )
    }

    @Test(.enabled(if: TLSCertificates.isEnabled, tlsUnavailableReason))
    func coherenceHoldsOverTLSOnEveryPrimary() async throws {
        let folder = TemporaryDirectory()
        let cluster = try await Self.tlsCluster(in: folder)
        try await Self.checkCoherence(cluster, namespace: "tls-coherent-\(UUID().uuidString.prefix(8))")
    }

    @Test(.enabled(if: TLSCertificates.isEnabled, tlsUnavailableReason))
    func aClusterSignedByAnotherAuthorityFailsBuildAndEveryCall() async throws {
        let folder = TemporaryDirectory()
        let cluster = try await Self.tlsCluster(in: folder)
        let certificates = try #require(cluster.certificates)
        let untrusted = try Self.level(cluster, authority: certificates.otherAuthority, namespace: "untrusted")
        let error = try #require(throws: CacheError.self) {
            try folder.stringBuilder("untrusted").sharedLevel(untrusted).build()
        }
        #expect(error.code == .invalidConfiguration)
        #expect(error.message.contains("certificate was not accepted"), "\(error.message)")
        let coherent = try Self.level(cluster, authority: certificates.otherAuthority, namespace: "untrusted")
        #expect(throws: CacheError.invalidConfiguration) {
            try folder.stringBuilder("coherent").sharedLevel(coherent).coherence(.invalidations).build()
        }
        // Each call fails with the certificate's fault, not a timeout: no node gives the level a map.
        for call in 0..<3 {
            let failure = try await #require(throws: CacheError.self) {
                try await untrusted.set(Data("v".utf8), forKey: "k\(call)")
            }
            #expect(failure.code == .network)
            #expect(failure.message.contains("certificate was not accepted"), "\(failure.message)")
        }
        let read = try await #require(throws: CacheError.self) { try await untrusted.get("k0") }
        #expect(read.message.contains("certificate was not accepted"), "\(read.message)")
        #expect(untrusted.nodes.router?.topology == nil)
        // The same cluster, trusted, works.
        let trusted = try Self.level(cluster, namespace: "untrusted")
        let cache = try folder.stringBuilder("trusted").sharedLevel(trusted).build()
        try await cache.save("v", forKey: "k")
        #expect(try await trusted.get("k").isEmpty == false)
    }

    // MARK: - A password

    @Test func thePasswordInTheURLReachesEveryPrimaryAndItsTrackingConnection() async throws {
        let cluster = try await RedisTestCluster.start(password: "cluster-s3cret")
        #expect(cluster.seedURLs.allSatisfy { $0.hasPrefix("redis://:cluster-s3cret@127.0.0.1:") })
        // Fixed, for the same reason as `tls-keys`.
        let namespace = "login-keys"
        let level = try Self.level(cluster, namespace: namespace)
        #expect(level.configuration.password == "cluster-s3cret")
        try await Self.checkKeysOverEveryPrimary(level, cluster, namespace: namespace)
        // A slot moved by hand (`MIGRATE … AUTH`): the level follows `MOVED` to a node it logs in to.
        let key = "moved"
        try await level.set(Data("before".utf8), forKey: key)
        let slot = RedisTestCluster.slot(of: level.storedKey(key))
        let source = try await cluster.node(forSlot: slot)
        let destination = try await cluster.primaries.map { try cluster.server($0) }.first { $0.port != source.port }
        try await cluster.migrate(slot: slot, from: source, to: try #require(destination))
        #expect(try await level.get(key) == Data("before".utf8))
        #expect(level.nodes.router?.topology?.shard(forSlot: slot)?.primary.port == destination.map { Int($0.port) })
        try await Self.checkCoherence(cluster, namespace: "\(namespace)-coherent")
    }

    @Test func aWrongOrMissingPasswordFailsBuildAndEveryCallWithTheServersWords() async throws {
        let cluster = try await RedisTestCluster.start(password: "cluster-s3cret")
        let folder = TemporaryDirectory()
        let ports = cluster.nodes.prefix(2).map(\.port)
        let cases: [(urls: [String], words: String)] = [
            (ports.map { "redis://:wrong@127.0.0.1:\($0)" }, "WRONGPASS"),
            (ports.map { "redis://127.0.0.1:\($0)" }, "NOAUTH"),
            (ports.map { "redis://nobody:cluster-s3cret@127.0.0.1:\($0)" }, "WRONGPASS"),
        ]
        for (index, (urls, words)) in cases.enumerated() {
            let level = try Self.level(cluster, urls: urls, namespace: "app")
            let error = #expect(throws: CacheError.self, "\(urls)") {
                try folder.stringBuilder("c\(index)").sharedLevel(level).build()
            }
            #expect(error?.code == .invalidConfiguration, "\(urls)")
            #expect(error?.message.contains(words) == true, "\(urls): \(error?.message ?? "")")
            #expect(folder.entryFiles(in: "c\(index)").isEmpty)
            let coherent = #expect(throws: CacheError.self, "\(urls)") {
                try folder.stringBuilder("coherent\(index)").sharedLevel(
                    try Self.level(cluster, urls: urls, namespace: "app")
                )
                .coherence(.invalidations).build()
            }
            #expect(coherent?.code == .invalidConfiguration, "\(urls)")
            // A level used without a cache: each call fails with the node's refusal.
            for call in 0..<3 {
                let failure = await #expect(throws: CacheError.self, "\(urls)") {
                    try await level.set(Data("v".utf8), forKey: "k\(call)")
                }
                #expect(failure?.code == .network, "\(urls)")
                #expect(failure?.message.contains(words) == true, "\(urls): \(failure?.message ?? "")")
            }
        }
        // The right one builds, and works.
        let right = try Self.level(cluster, namespace: "app")
        let cache = try folder.stringBuilder("right").sharedLevel(right).build()
        try await cache.save("v", forKey: "k")
        #expect(try await right.get("k").isEmpty == false)
    }
}

extension RedisTestCluster {
    /// A node's setting, as `CONFIG GET` answers it (a map in RESP3, names and values in RESP2).
    fileprivate func setting(_ name: String, on node: RedisTestServer) async throws -> String? {
        switch try await send(["CONFIG", "GET", name], to: node) {
        case .map(let fields), .array(let fields): fields.count == 2 ? fields[1].text : nil
        default: nil
        }
    }
}
