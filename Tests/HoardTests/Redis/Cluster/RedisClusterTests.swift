import Foundation
import HoardTestSupport
import Testing

@testable import Hoard
@testable import HoardRedis

/// `RedisCacheLevel(cluster:namespace:)` against a real Redis Cluster (three primaries, each with a
/// replica, started by the test): keys over every slot range, batches split per slot, leases in
/// their value's slot, `ASK` and `MOVED` during a migration, a resharding under load, failovers by
/// `CLUSTER FAILOVER` and by kill -9, and coherence through each.
///
/// Serialized: six servers per test are plenty for two cores.
@Suite(
    .enabled(if: RedisTestCluster.isEnabled, RedisTestCluster.unavailableReason),
    .serialized,
    .timeLimit(.minutes(10))
)
struct RedisClusterTests {
    init() { TestLog.install() }

    /// A level on `cluster` (over TLS trusting its authority, and with its password, when it has
    /// them), with patient timeouts for a loaded machine.
    static func level(
        _ cluster: RedisTestCluster,
        namespace: String,
        clientName: String? = nil,
        commandTimeout: Duration = .seconds(10),
        connectTimeout: Duration = .seconds(10),
        maximumRedirections: Int = 5
    ) throws -> RedisCacheLevel {
        var configuration = try RedisCacheLevel.Configuration(cluster: Array(cluster.seedURLs.prefix(2)))
        configuration.cluster?.maximumRedirections = maximumRedirections
        configuration.tls?.certificateAuthorityFile = cluster.certificates?.authority
        configuration.clientName = clientName
        configuration.commandTimeout = commandTimeout
        configuration.connectTimeout = connectTimeout
        configuration.trackingPingTimeout = .seconds(30)
        configuration.poolSize = 2
        return try RedisCacheLevel(configuration, namespace: namespace)
    }

    /// A coherent cache on its own level.
    static func coherentCache(
        _ folder: TemporaryDirectory,
        _ container: String,
        _ cluster: RedisTestCluster,
        namespace: String,
        commandTimeout: Duration = .seconds(10)
    ) throws -> Cache<String> {
        let level = try level(cluster, namespace: namespace, clientName: container, commandTimeout: commandTimeout)
        return try folder.stringBuilder(container).sharedLevel(level)
            .coherence(.invalidations(maxLocalAge: .seconds(86_400), duringOutage: .serveLocalCopies)).build()
    }

    /// Saves `value` on `writer` and waits until `reader` has heard of it, or dropped every copy
    /// for coherence (a write that lands on a primary the reader does not track yet, just after a
    /// failover, is covered by the drop that tracking it begins with); says what the reader's
    /// tracking was doing when neither comes.
    static func save(
        _ value: String,
        forKey key: String,
        on writer: Cache<String>,
        heardBy reader: Cache<String>
    ) async throws {
        let heard = reader.statistics.invalidations
        let flushes = reader.statistics.coherenceFlushes
        try await writer.save(value, forKey: key)
        let tracking = reader.invalidations.withLock { $0 } as? ClusterTracking
        #expect(
            await waitUntil {
                reader.statistics.invalidations > heard || reader.statistics.coherenceFlushes > flushes
            },
            "\(key): \(tracking?.stateDescription ?? "no cluster tracking")"
        )
    }

    /// How many keys of `namespace` each primary holds.
    static func keysPerPrimary(_ cluster: RedisTestCluster, namespace: String) async throws -> [Int] {
        var counts: [Int] = []
        for primary in try await cluster.primaries {
            let reply = try await cluster.send(["KEYS", "\(namespace):*"], to: try cluster.server(primary))
            guard case .array(let keys) = reply else { throw TestServerError("KEYS answered \(reply)") }
            counts.append(keys.count)
        }
        return counts
    }

    @Test func keysSpreadOverEveryPrimaryAndBatchesSplitPerSlot() async throws {
        let cluster = try await RedisTestCluster.start()
        let namespace = "spread-\(UUID().uuidString.prefix(8))"
        let level = try Self.level(cluster, namespace: namespace)
        let keys = (0..<600).map { "key-\($0)" }
        for key in keys { try await level.set(Data(key.utf8), forKey: key) }
        let counts = try await Self.keysPerPrimary(cluster, namespace: namespace)
        #expect(counts.count == 3 && counts.allSatisfy { $0 > 100 } && counts.reduce(0, +) == 600, "\(counts)")
        for key in keys.prefix(50) { #expect(try await level.get(key) == Data(key.utf8)) }
        // One MGET per slot, in the caller's order, misses as nil.
        let asked = keys.reversed() + ["missing-1", "missing-2"]
        let values = try await level.values(forKeys: Array(asked))
        #expect(values == asked.map { $0.hasPrefix("missing") ? nil : Data($0.utf8) })
        #expect(
            try await level.batchGetSome(["key-1", "missing", "key-2"]) == [Data("key-1".utf8), Data("key-2".utf8)]
        )
        #expect(try await level.timeToLive(forKey: "key-3") == nil)
        try await level.ping()
        // Every spelling of a key names one server key, so one slot.
        try await level.set(Data("composed".utf8), forKey: "caf\u{E9}")
        #expect(try await level.get("cafe\u{301}") == Data("composed".utf8))
        // A namespace with a hash tag puts every key on one primary.
        let tagged = try Self.level(cluster, namespace: "{\(namespace)}")
        for key in keys.prefix(40) { try await tagged.set(Data(key.utf8), forKey: key) }
        #expect(try await Self.keysPerPrimary(cluster, namespace: "{\(namespace)}").sorted() == [0, 0, 40])
        // Removing the namespace reaches every primary, and leaves other namespaces alone.
        try await level.removeAll()
        #expect(try await Self.keysPerPrimary(cluster, namespace: namespace) == [0, 0, 0])
        #expect(try await tagged.get("key-7") == Data("key-7".utf8))
    }

    /// A primary down does not spare the others their clear; the clear then fails: the victim's
    /// replica will serve the keys it held.
    @Test func aClearReachesTheLivePrimariesAndFailsWhenOneIsDown() async throws {
        let cluster = try await RedisTestCluster.start()
        let namespace = "clear-\(UUID().uuidString.prefix(8))"
        let level = try Self.level(cluster, namespace: namespace, commandTimeout: .seconds(2))
        let keys = (0..<300).map { "key-\($0)" }
        for key in keys { try await level.set(Data("old".utf8), forKey: key) }
        let primaries = try await cluster.primaries
        let counts = try await Self.keysPerPrimary(cluster, namespace: namespace)
        #expect(counts.count == 3 && counts.allSatisfy { $0 > 50 }, "\(counts)")
        // The level keeps its map from before the kill; the victim is the first primary it names, so
        // that the others come after it.
        let first = try #require(level.nodes.router?.topology?.primaries.first)
        let victim = try cluster.server(try #require(primaries.first { $0.port == first.port }))
        cluster.kill(victim)
        await #expect(throws: CacheError.self) { try await level.removeAll() }
        let live = primaries.filter { $0.port != victim.port }
        for primary in live {
            let reply = try await cluster.send(["KEYS", "\(namespace):*"], to: try cluster.server(primary))
            guard case .array(let found) = reply else { throw TestServerError("KEYS answered \(reply)") }
            #expect(found.isEmpty, "a live primary kept \(found.count) of the namespace's keys")
        }
        // A cache in front of the level hears of that failure (the level is a
        // `ClearReportingCacheLevel`; see `SharedLevelTests`): the saves a failed clear dropped fail
        // with it.
    }

    /// A shard lost for good (its primary and its replica down, the others serving on with
    /// `cluster-require-full-coverage no`): the other shards serve all along, and a clear clears them
    /// but fails, as the lost nodes keep their keys, to serve them again if they come back.
    @Test func aClearFailsForTheSlotsOfAShardLostForGood() async throws {
        let cluster = try await RedisTestCluster.start()
        for node in cluster.liveNodes {
            _ = try await cluster.send(["CONFIG", "SET", "cluster-require-full-coverage", "no"], to: node)
        }
        let namespace = "lost-\(UUID().uuidString.prefix(8))"
        let level = try Self.level(cluster, namespace: namespace, commandTimeout: .seconds(1))
        let keys = (0..<60).map { "k\($0)" }
        for key in keys { try await level.set(Data("v".utf8), forKey: key) }
        let lostKey = keys[0]
        let victim = try await cluster.node(forSlot: ClusterSlot.of(level.storedKey(lostKey)))
        let victimID = try #require(try await cluster.primaries.first { $0.port == victim.port }?.id)
        let replicas = try await cluster.replicas.filter { $0.primaryID == victimID }.map { try cluster.server($0) }
        #expect(!replicas.isEmpty)
        var served: [String] = []
        for key in keys where try await cluster.node(forSlot: ClusterSlot.of(level.storedKey(key))).port != victim.port
        {
            served.append(key)
        }
        for replica in replicas { cluster.kill(replica) }
        cluster.kill(victim)
        // Once the others count the victim as failed, its slots have no primary in the level's map.
        #expect(
            await waitUntilAsync {
                _ = try? await level.get(lostKey)
                let topology = level.nodes.router?.topology
                return topology.map { $0.ownedSlots < ClusterSlot.count } == true
            }
        )
        for key in served.prefix(10) { #expect(try await level.get(key) == Data("v".utf8)) }
        await #expect(throws: CacheError.self) { try await level.removeAll() }
        for key in served.prefix(10) {
            await #expect(throws: CacheError.notFound(key: key)) { try await level.get(key) }
        }
    }

    @Test func theSlotsOfAShardLostForGoodFailAtOnceOnceTheyHaveHadNoPrimaryForAWhile() async throws {
        let cluster = try await RedisTestCluster.start()
        for node in cluster.liveNodes {
            _ = try await cluster.send(["CONFIG", "SET", "cluster-require-full-coverage", "no"], to: node)
        }
        let namespace = "lost-\(UUID().uuidString.prefix(8))"
        // A long timeout: a command for the lost slots that waits for a primary waits this long,
        // and one that fails at once stays far below half of it even in a loaded run.
        let timeout = Duration.seconds(300)
        let level = try Self.level(cluster, namespace: namespace, commandTimeout: timeout)
        let router = try #require(level.nodes.router)
        let keys = (0..<60).map { "k\($0)" }
        for key in keys { try await level.set(Data("v".utf8), forKey: key) }
        let lostKey = keys[0]
        let lostSlot = ClusterSlot.of(level.storedKey(lostKey))
        let servedKey = try #require(
            try await Self.loseShard(ofSlot: lostSlot, keys: keys, level: level, cluster: cluster)
        )
        // Once the others count the victim as failed, its slots have no primary in the level's map;
        // once they have had none for the grace, a command for them fails without waiting.
        #expect(await Self.waitUntilUnownedForTheGrace(lostSlot, router: router))
        let start = ContinuousClock.now
        await #expect {
            try await level.get(lostKey)
        } throws: { error in
            guard let error = error as? CacheError, error.code == .network else { return false }
            return error.message.contains("has served the slot \(lostSlot) for")
        }
        let elapsed = start.duration(to: .now)
        #expect(elapsed < timeout / 2, "failed after \(elapsed)")
        // A batch read: the lost key is a miss among the values, but a get of all the keys fails
        // with the slot's error, not as if the key were missing.
        #expect(try await level.values(forKeys: [lostKey, servedKey]) == [nil, Data("v".utf8)])
        await #expect {
            try await level.allBatch().get([lostKey, servedKey])
        } throws: { error in
            (error as? CacheError)?.code == .network
        }
        // The other shards serve as before.
        #expect(try await level.get(servedKey) == Data("v".utf8))
        try await level.set(Data("w".utf8), forKey: servedKey)
        #expect(try await level.get(servedKey) == Data("w".utf8))
    }

    @Test func aLevelUsedRarelyTimesALostShardAndFailsItsSlotsAtOnceAfterTheGrace() async throws {
        let cluster = try await RedisTestCluster.start()
        for node in cluster.liveNodes {
            _ = try await cluster.send(["CONFIG", "SET", "cluster-require-full-coverage", "no"], to: node)
        }
        // Long: a command that fails at once stays far below half of it even in a loaded run.
        let timeout = Duration.seconds(300)
        let level = try Self.level(cluster, namespace: "rare-\(UUID().uuidString.prefix(8))", commandTimeout: timeout)
        let router = try #require(level.nodes.router)
        try await level.set(Data("v".utf8), forKey: "k")
        let slot = ClusterSlot.of(level.storedKey("k"))
        _ = try await Self.loseShard(ofSlot: slot, keys: [], level: level, cluster: cluster)
        #expect(
            await waitUntilAsync {
                router.requestRefresh()
                return router.unownedDuration(forSlot: slot) != nil
            }
        )
        // From here nothing uses the level. Without maps asked for on their own, the one above would
        // be the last, and a command much later would find no evidence the shard is still lost.
        #expect(
            await waitUntilAsync(seconds: 600) {
                router.unownedDuration(forSlot: slot).map {
                    $0 >= ClusterRouter.unownedSlotGrace + ClusterRouter.unownedSlotMapGap
                } == true
            }
        )
        let start = ContinuousClock.now
        await #expect {
            try await level.get("k")
        } throws: { error in
            guard let error = error as? CacheError, error.code == .network else { return false }
            return error.message.contains("has served the slot \(slot) for")
        }
        let elapsed = start.duration(to: .now)
        #expect(elapsed < timeout / 2, "failed after \(elapsed)")
    }

    /// Under `cluster-require-full-coverage yes` (Redis's default) every node answers `CLUSTERDOWN`
    /// from the moment the others count a killed primary as failed until its replica is elected: a
    /// command for any slot waits for the election, within its timeout, instead of failing.
    @Test func aFailoverUnderFullCoverageFailsNoCommandOfTheOtherShards() async throws {
        let cluster = try await RedisTestCluster.start()
        let level = try Self.level(
            cluster,
            namespace: "down-\(UUID().uuidString.prefix(8))",
            commandTimeout: .seconds(10)
        )
        let router = try #require(level.nodes.router)
        let keys = (0..<60).map { "k\($0)" }
        for key in keys { try await level.set(Data("v".utf8), forKey: key) }
        let victim = try await cluster.node(forSlot: ClusterSlot.of(level.storedKey(keys[0])))
        var others: [String] = []
        for key in keys where try await cluster.node(forSlot: ClusterSlot.of(level.storedKey(key))).port != victim.port
        {
            others.append(key)
        }
        cluster.kill(victim)
        let settled = Protected(false)
        let failover = Task {
            defer { settled.withLock { $0 = true } }
            return try await cluster.waitForFailover(of: victim.port)
        }
        var failures: [String] = []
        var writes = 0
        while !settled.withLock({ $0 }) {
            let key = others[writes % others.count]
            do {
                try await level.set(Data("w\(writes)".utf8), forKey: key)
                #expect(try await level.get(key) == Data("w\(writes)".utf8))
            } catch {
                failures.append("\(key): \(error)")
            }
            writes += 1
        }
        _ = try await failover.value
        #expect(router.clusterDownAnswerCount > 0, "the writes never met the cluster down")
        #expect(failures.isEmpty, "\(failures.count) of \(writes) failed: \(failures.prefix(3))")
    }

    /// A shard lost for good keeps a cluster that requires every slot down: once the maps have shown
    /// its slots without a primary for the grace, a command for any slot fails at once, saying why.
    @Test func aClusterKeptDownByALostShardFailsEveryCommandAtOnceAfterTheGrace() async throws {
        let cluster = try await RedisTestCluster.start()
        // Long: a command that fails at once stays far below half of it even in a loaded run.
        let timeout = Duration.seconds(300)
        let level = try Self.level(cluster, namespace: "kept-\(UUID().uuidString.prefix(8))", commandTimeout: timeout)
        let router = try #require(level.nodes.router)
        let keys = (0..<60).map { "k\($0)" }
        for key in keys { try await level.set(Data("v".utf8), forKey: key) }
        let lostSlot = ClusterSlot.of(level.storedKey(keys[0]))
        let servedKey = try #require(
            try await Self.loseShard(ofSlot: lostSlot, keys: keys, level: level, cluster: cluster)
        )
        #expect(await Self.waitUntilUnownedForTheGrace(lostSlot, router: router))
        let start = ContinuousClock.now
        await #expect {
            try await level.get(servedKey)
        } throws: { error in
            guard let error = error as? CacheError, error.code == .serverRefused else { return false }
            return error.message.contains("CLUSTERDOWN") && error.message.contains("no primary has served the slot")
                && !error.message.contains("RedisCacheLevel(cluster:")
        }
        let elapsed = start.duration(to: .now)
        #expect(elapsed < timeout / 2, "failed after \(elapsed)")
        #expect(router.clusterDownAnswerCount > 0)
    }

    /// A cluster that lost its majority fails commands at once after the grace.
    ///
    /// Two primaries of three killed: no replica can be elected, the map still names a primary
    /// for every slot, and the last primary answers `CLUSTERDOWN` for good. Commands wait for it
    /// until it has answered so for the grace, then fail at once; reads served meanwhile (a cluster
    /// down that still takes them) do not restart that time.
    @Test func aClusterThatLostItsMajorityFailsCommandsAtOnceAfterTheGrace() async throws {
        let cluster = try await RedisTestCluster.start()
        for node in cluster.liveNodes {
            _ = try await cluster.send(["CONFIG", "SET", "cluster-allow-reads-when-down", "yes"], to: node)
        }
        let timeout = Duration.seconds(2)
        let level = try Self.level(
            cluster,
            namespace: "minority-\(UUID().uuidString.prefix(8))",
            commandTimeout: timeout
        )
        let router = try #require(level.nodes.router)
        let keys = (0..<60).map { "k\($0)" }
        for key in keys { try await level.set(Data("v".utf8), forKey: key) }
        let primaries = try await cluster.primaries.map { try cluster.server($0) }
        let survivor = primaries[0]
        var survivorKeys: [String] = []
        for key in keys
        where try await cluster.node(forSlot: ClusterSlot.of(level.storedKey(key))).port == survivor.port {
            survivorKeys.append(key)
        }
        let key = try #require(survivorKeys.first)
        for primary in primaries.dropFirst() { cluster.kill(primary) }
        // Writes of the survivor's keys, each waiting its timeout at most, with reads in between.
        var failedAtOnce: String?
        let start = ContinuousClock.now
        while failedAtOnce == nil, start.duration(to: .now) < .seconds(90) {
            _ = try? await level.get(key)
            let attempt = ContinuousClock.now
            do {
                try await level.set(Data("w".utf8), forKey: key)
            } catch let error as CacheError where attempt.duration(to: .now) < timeout / 2 {
                if error.message.contains("has answered CLUSTERDOWN") { failedAtOnce = error.message }
            } catch {}
        }
        let message = try #require(failedAtOnce, "no write failed at once in 90 s")
        #expect(message.contains("for 1"), "\(message)")
        #expect(router.clusterDownAnswerCount > 0)
    }

    @Test func clusterDownAnswersAreTimedFromTheFirstOfARunWithoutLongGaps() {
        var down = ClusterRouter.ClusterDown()
        ClusterRouter.updateClusterDown(&down, now: 1_000)
        #expect(down == .init(since: 1_001, last: 1_000))
        ClusterRouter.updateClusterDown(&down, now: 3_900)
        ClusterRouter.updateClusterDown(&down, now: 6_800)
        #expect(down == .init(since: 1_001, last: 6_800))
        // A caller that took its time before another's later answer changes nothing.
        ClusterRouter.updateClusterDown(&down, now: 6_700)
        #expect(down == .init(since: 1_001, last: 6_800))
        // More than the gap without an answer: nobody saw what happened in between.
        ClusterRouter.updateClusterDown(&down, now: 9_801)
        #expect(down == .init(since: 9_802, last: 9_801))
    }

    @Test func aQuietLevelServesTheSlotsOfAFailoverItSawWithoutAPrimaryLongAgo() async throws {
        let cluster = try await RedisTestCluster.start()
        let level = try Self.level(
            cluster,
            namespace: "quiet-\(UUID().uuidString.prefix(8))",
            commandTimeout: .seconds(5)
        )
        let router = try #require(level.nodes.router)
        try await level.set(Data("v".utf8), forKey: "k")
        let slot = ClusterSlot.of(level.storedKey("k"))
        let victim = try await cluster.node(forSlot: slot)
        let victimID = try #require(try await cluster.primaries.first { $0.port == victim.port }?.id)
        let replicas = try await cluster.replicas.filter { $0.primaryID == victimID }.map { try cluster.server($0) }
        let successor = try #require(replicas.first)
        // The replicas wait to be told, so that the election comes only once the level's map has
        // shown the slot without a primary, however slow the machine.
        for replica in replicas {
            _ = try await cluster.send(["CONFIG", "SET", "cluster-replica-no-failover", "yes"], to: replica)
        }
        cluster.kill(victim)
        #expect(
            await waitUntilAsync {
                router.requestRefresh()
                return router.unownedDuration(forSlot: slot) != nil
            }
        )
        let seen = ContinuousClock.now
        _ = try await cluster.send(["CLUSTER", "FAILOVER", "FORCE"], to: successor)
        _ = try await cluster.waitForFailover(of: victim.port)
        // Then no command comes for longer than the grace, as on a level nobody uses.
        try await Task.sleep(until: seen + ClusterRouter.unownedSlotGrace + .milliseconds(500))
        // The time without a primary ended with the election, whether the level's own refreshes saw
        // it or the read's map does: the read is served by the new primary.
        #expect(try await level.get("k") == Data("v".utf8))
    }

    @Test func aSlotLeftWithoutAPrimaryIsTimedFromTheFirstMapThatLeftItSo() {
        let endpoint = RedisCacheLevel.Configuration.Endpoint(host: "127.0.0.1", port: 7000)
        var whole = ClusterTopology()
        whole.assign(0...(ClusterSlot.count - 1), to: endpoint)
        var since: [UInt64]?
        ClusterRouter.updateUnownedSince(&since, for: whole, now: 5, previousMap: 0)
        #expect(since == nil)
        var partial = ClusterTopology()
        partial.assign(100...(ClusterSlot.count - 1), to: endpoint)
        ClusterRouter.updateUnownedSince(&since, for: partial, now: 5, previousMap: 5)
        #expect(since?[0] == 6 && since?[99] == 6 && since?[100] == 0)
        // Fewer slots served later: the slots lost before keep their time, the new ones get theirs.
        var smaller = ClusterTopology()
        smaller.assign(200...(ClusterSlot.count - 1), to: endpoint)
        ClusterRouter.updateUnownedSince(&since, for: smaller, now: 900, previousMap: 5)
        #expect(since?[0] == 6 && since?[99] == 6 && since?[100] == 901 && since?[199] == 901)
        #expect(since?[200] == 0)
        // Some served again: they lose their time, and a later loss starts its own.
        ClusterRouter.updateUnownedSince(&since, for: partial, now: 950, previousMap: 900)
        #expect(since?[0] == 6 && since?[100] == 0)
        ClusterRouter.updateUnownedSince(&since, for: smaller, now: 1_000, previousMap: 950)
        #expect(since?[100] == 1_001)
        // Maps as far apart as the limit: the time runs on. Farther apart: nobody saw the slots in
        // between (a failover may have ended and another begun), so their time starts again.
        let gap = UInt64(ClusterRouter.unownedSlotMapGap.components.seconds * 1_000)
        ClusterRouter.updateUnownedSince(&since, for: smaller, now: 1_000 + gap, previousMap: 1_000)
        #expect(since?[0] == 6 && since?[100] == 1_001)
        ClusterRouter.updateUnownedSince(&since, for: smaller, now: 2_001 + gap, previousMap: 1_000 + gap)
        #expect(since?[0] == 6 && since?[100] == 1_001)
        ClusterRouter.updateUnownedSince(&since, for: smaller, now: 3_002 + 2 * gap, previousMap: 2_001 + gap)
        #expect(since?[0] == 3_003 + 2 * gap && since?[100] == 3_003 + 2 * gap && since?[200] == 0)
        ClusterRouter.updateUnownedSince(&since, for: whole, now: 4_000 + 2 * gap, previousMap: 3_002 + 2 * gap)
        #expect(since == nil)
    }

    @Test func onlyAFreshMapThatLongShowedASlotWithoutAPrimaryFailsItsCommandsAtOnce() {
        let grace = UInt64(ClusterRouter.unownedSlotGrace.components.seconds * 1_000)
        let age = UInt64(ClusterRouter.unownedSlotMapAge.components.seconds * 1_000)
        // The slot has a primary.
        #expect(ClusterRouter.lostSlotDuration(since: 0, mapTime: 50_000, now: 50_000) == nil)
        // Without one in the maps for less than the grace: a failover may be under way.
        #expect(ClusterRouter.lostSlotDuration(since: 1, mapTime: grace - 2, now: grace - 2) == nil)
        // For the grace, in a fresh map: it fails at once.
        #expect(ClusterRouter.lostSlotDuration(since: 1, mapTime: grace, now: grace) == .milliseconds(grace))
        #expect(ClusterRouter.lostSlotDuration(since: 1, mapTime: grace, now: grace + age - 1) != nil)
        // A map without one at first, and none since while the level was quiet: however long ago,
        // the next command waits for a new map (the replica may have taken over meanwhile).
        #expect(ClusterRouter.lostSlotDuration(since: 1, mapTime: 0, now: 10 * grace) == nil)
        // Long without one, but the last map is old: a new one first.
        #expect(ClusterRouter.lostSlotDuration(since: 1, mapTime: grace, now: grace + age) == nil)
    }

    @Test func leasesLiveInTheirValuesSlot() async throws {
        let cluster = try await RedisTestCluster.start()
        for namespace in ["lease-\(UUID().uuidString.prefix(8))", "{lease-\(UUID().uuidString.prefix(8))}"] {
            let level = try Self.level(cluster, namespace: namespace)
            for index in 0..<40 {
                let key = "k\(index)"
                #expect(try await level.takeLease(forKey: key, token: "me", duration: .seconds(3_600)))
                #expect(try await level.takeLease(forKey: key, token: "other", duration: .seconds(3_600)) == false)
                #expect(try await level.set(Data("v".utf8), forKey: key, expiresAt: nil, ifLeasedTo: "me"))
                #expect(try await level.get(key) == Data("v".utf8))
                #expect(try await level.takeLease(forKey: key, token: "other", duration: .seconds(3_600)))
                try await level.setEndingLease(Data("w".utf8), forKey: key, expiresAt: nil)
                #expect(
                    try await level.set(Data("late".utf8), forKey: key, expiresAt: nil, ifLeasedTo: "other") == false
                )
                #expect(try await level.get(key) == Data("w".utf8))
                try await level.removeValueEndingLease(forKey: key)
                await #expect(throws: CacheError.notFound(key: key)) { try await level.get(key) }
            }
        }
    }

    @Test func askAndMovedAreFollowedThroughAMigration() async throws {
        let cluster = try await RedisTestCluster.start()
        let namespace = "ask-\(UUID().uuidString.prefix(8))"
        let level = try Self.level(cluster, namespace: namespace)
        // Forty keys of one slot (found by the test's own CRC16), and one more to write mid-way.
        let slot = RedisTestCluster.slot(of: Array("\(namespace):seed".utf8))
        var keys: [String] = []
        var index = 0
        while keys.count < 41 {
            if RedisTestCluster.slot(of: Array("\(namespace):k\(index)".utf8)) == slot { keys.append("k\(index)") }
            index += 1
        }
        let late = keys.removeLast()
        for key in keys { try await level.set(Data(key.utf8), forKey: key) }
        let source = try await cluster.node(forSlot: slot)
        let destination = try await cluster.primaries.map { try cluster.server($0) }.first { $0.port != source.port }!
        let migration = try await cluster.startMigration(slot: slot, from: source, to: destination)
        #expect(!migration.movedKeys.isEmpty && migration.movedKeys.count < keys.count)
        // The source answers ASK for a key it has moved, and for a key it never had.
        for key in keys { #expect(try await level.get(key) == Data(key.utf8)) }
        try await level.set(Data(late.utf8), forKey: late)
        #expect(try await level.get(late) == Data(late.utf8))
        #expect(try await level.values(forKeys: keys).allSatisfy { $0 != nil })
        try await cluster.finishMigration(migration)
        // Now the source answers MOVED, and the level's map learns the new owner.
        for key in keys + [late] { #expect(try await level.get(key) == Data(key.utf8)) }
        let owner = level.nodes.router?.topology?.shard(forSlot: ClusterSlot.of(level.storedKey(late)))?.primary
        #expect(owner?.port == Int(destination.port))
    }

    @Test func aReshardingUnderLoadLosesNoConfirmedWrite() async throws {
        let cluster = try await RedisTestCluster.start()
        let namespace = "reshard-\(UUID().uuidString.prefix(8))"
        let level = try Self.level(cluster, namespace: namespace)
        let keys = (0..<200).map { "k\($0)" }
        for key in keys { try await level.set(Data("0".utf8), forKey: key) }
        let primaries = try await cluster.primaries.map { try cluster.server($0) }
        let confirmed = Locked([String: Int]())
        let failures = Locked(0)
        let stop = Locked(false)
        // Two writers and a reader, each key's versions rising, while 1000 slots move.
        let load = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<2 {
                    group.addTask {
                        var version = 1
                        while !stop.withLock({ $0 }) {
                            for key in keys where Int(key.dropFirst())! % 2 == writer {
                                do {
                                    try await level.set(Data(String(version).utf8), forKey: key)
                                    confirmed.withLock { $0[key] = version }
                                } catch {
                                    failures.withLock { $0 += 1 }
                                }
                            }
                            version += 1
                        }
                    }
                }
                group.addTask {
                    while !stop.withLock({ $0 }) {
                        for key in keys.prefix(50) { _ = try? await level.get(key) }
                    }
                }
                try await group.waitForAll()
            }
        }
        try await cluster.reshard(count: 1000, from: primaries[0], to: primaries[1])
        try await cluster.reshard(count: 500, from: primaries[2], to: primaries[0])
        stop.withLock { $0 = true }
        try await load.value
        let written = confirmed.withLock { $0 }
        #expect(written.count == keys.count)
        for key in keys {
            let stored = try await level.get(key)
            #expect(stored == Data(String(written[key] ?? 0).utf8), "\(key)")
        }
        print(
            "Resharding 1500 slots under load: \(failures.withLock { $0 }) failed writes of \(written.values.reduce(0, +))"
        )
    }

    @Test func coherenceHoldsThroughAMigrationAndAManualFailover() async throws {
        let cluster = try await RedisTestCluster.start()
        let folder = TemporaryDirectory()
        let namespace = "coherent-\(UUID().uuidString.prefix(8))"
        let writer = try Self.coherentCache(folder, "a", cluster, namespace: namespace)
        let reader = try Self.coherentCache(folder, "b", cluster, namespace: namespace)
        #expect(await waitUntil { writer.isCoherent && reader.isCoherent })
        let keys = (0..<30).map { "k\($0)" }

        /// The reader holds `value` for every key in memory; then the writer changes each, and the
        /// reader's next read is the new value.
        func roundTrip(_ round: String) async throws {
            for key in keys {
                try await Self.save("old \(round)", forKey: key, on: writer, heardBy: reader)
                #expect(try await reader.getOrFetch(forKey: key) == "old \(round)")
            }
            #expect(await waitUntil { reader.isCoherent })
            for key in keys where reader.memory?.peek(key)?.value == "old \(round)" {
                try await writer.save("new \(round)", forKey: key)
                #expect(await waitUntil { reader.memory?.peek(key)?.value != "old \(round)" }, "\(key)")
                #expect(try await reader.getOrFetch(forKey: key) == "new \(round)")
            }
        }
        try await roundTrip("before")
        // Copies taken, then their slots move: a write on the new owner still reaches the reader.
        for key in keys { _ = try await reader.getOrFetch(forKey: key) }
        let primaries = try await cluster.primaries.map { try cluster.server($0) }
        let level = try Self.level(cluster, namespace: namespace)
        let slot = ClusterSlot.of(level.storedKey(keys[0]))
        let source = try await cluster.node(forSlot: slot)
        try await cluster.migrate(slot: slot, from: source, to: primaries.first { $0.port != source.port }!)
        try await writer.save("moved", forKey: keys[0])
        #expect(await waitUntil { reader.memory?.peek(keys[0])?.value != "new before" })
        #expect(try await reader.getOrFetch(forKey: keys[0]) == "moved")
        try await roundTrip("migrated")

        // A replica takes over from its primary on request.
        let replica = try cluster.server(try await cluster.replicas[0])
        let start = ContinuousClock.now
        try await cluster.failover(replica: replica)
        try await roundTrip("failed over")
        print("Manual failover: a full round of writes and reads done \(ContinuousClock.now - start) after it began")
    }

    @Test func aKilledPrimaryIsReplacedAndCoherenceComesBack() async throws {
        let cluster = try await RedisTestCluster.start()
        let folder = TemporaryDirectory()
        let namespace = "killed-\(UUID().uuidString.prefix(8))"
        let writer = try Self.coherentCache(folder, "a", cluster, namespace: namespace, commandTimeout: .seconds(2))
        let reader = try Self.coherentCache(folder, "b", cluster, namespace: namespace, commandTimeout: .seconds(2))
        #expect(await waitUntil { writer.isCoherent && reader.isCoherent })
        let level = try Self.level(cluster, namespace: namespace)
        let keys = (0..<60).map { "k\($0)" }
        for key in keys {
            try await Self.save("old", forKey: key, on: writer, heardBy: reader)
            #expect(try await reader.getOrFetch(forKey: key) == "old")
        }
        // Every write so far is on a replica too, so a takeover keeps it.
        for primary in try await cluster.primaries {
            _ = try await cluster.send(["WAIT", "1", "5000"], to: try cluster.server(primary))
        }
        // A cache with nothing of its own reads what the cluster holds.
        let checker = try folder.stringBuilder("check").sharedLevel(level).build()
        let victim = try await cluster.node(forSlot: ClusterSlot.of(level.storedKey(keys[0])))
        var victimKeys: [String] = []
        var others: [String] = []
        for key in keys {
            let owner = try await cluster.node(forSlot: ClusterSlot.of(level.storedKey(key)))
            if owner.port == victim.port { victimKeys.append(key) } else { others.append(key) }
        }
        let killed = ContinuousClock.now
        cluster.kill(victim)
        // The other primaries' keys are served all along.
        for key in others { #expect(try await checker.getOrFetch(forKey: key) == "old") }
        // A cache's write fails open (its shared write is logged), so the level's own write tells
        // when the victim's slots take writes again; its key is left out of the checks below.
        let probe = victimKeys.removeLast()
        var failedWrites = 0
        while true {
            do {
                try await level.set(Data("probe".utf8), forKey: probe)
                break
            } catch {
                failedWrites += 1
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        let writable = ContinuousClock.now - killed
        try await cluster.waitForFailover(of: victim.port)
        #expect(await waitUntil { reader.isCoherent })
        let coherent = ContinuousClock.now - killed
        try await writer.save("new", forKey: keys[0])
        #expect(await waitUntil { reader.memory?.peek(keys[0])?.value != "old" })
        #expect(try await reader.getOrFetch(forKey: keys[0]) == "new", "\(reader.statistics)")
        // Nothing confirmed and replicated before the kill is lost.
        for key in victimKeys.dropFirst() { #expect(try await checker.getOrFetch(forKey: key) == "old", "\(key)") }
        // And the new primary's changes reach the reader.
        for key in victimKeys.dropFirst() {
            try await writer.save("newer", forKey: key)
            #expect(await waitUntil { reader.memory?.peek(key)?.value != "old" })
            #expect(try await reader.getOrFetch(forKey: key) == "newer")
        }
        print(
            "Primary killed: writes to its slots failed for \(writable) (\(failedWrites) attempts), "
                + "coherent again after \(coherent)"
        )
    }
}

extension RedisClusterTests {
    /// Kills the primary of `slot` and its replicas; returns a key of `keys` that another shard
    /// serves, if any.
    static func loseShard(
        ofSlot slot: Int,
        keys: [String],
        level: RedisCacheLevel,
        cluster: RedisTestCluster
    ) async throws -> String? {
        let victim = try await cluster.node(forSlot: slot)
        let victimID = try #require(try await cluster.primaries.first { $0.port == victim.port }?.id)
        var served: String?
        for key in keys where try await cluster.node(forSlot: ClusterSlot.of(level.storedKey(key))).port != victim.port
        {
            served = key
            break
        }
        for replica in try await cluster.replicas.filter({ $0.primaryID == victimID }) {
            cluster.kill(try cluster.server(replica))
        }
        cluster.kill(victim)
        return served
    }

    /// Waits, asking for maps, until the level's maps have shown `slot` without a primary for the
    /// grace.
    static func waitUntilUnownedForTheGrace(_ slot: Int, router: ClusterRouter) async -> Bool {
        await waitUntilAsync {
            router.requestRefresh()
            return router.unownedDuration(forSlot: slot).map { $0 >= ClusterRouter.unownedSlotGrace } == true
        }
    }
}

extension RedisCacheLevel.Nodes {
    /// The router of a cluster level.
    var router: ClusterRouter? { if case .cluster(let router) = self { router } else { nil } }
}

extension RedisClusterTests {
    /// After `CLUSTER FAILOVER`, the demoted primary keeps its connections and announces nothing
    /// more (a replica does not announce what it replicates): a reader that only reads its own
    /// copies must still hear of the new primary's changes.
    @Test func aReaderOfLocalCopiesHearsTheNewPrimaryAfterAManualFailover() async throws {
        let cluster = try await RedisTestCluster.start()
        let folder = TemporaryDirectory()
        let namespace = "manual-\(UUID().uuidString.prefix(8))"
        let writer = try Self.coherentCache(folder, "a", cluster, namespace: namespace)
        let reader = try Self.coherentCache(folder, "b", cluster, namespace: namespace)
        #expect(await waitUntil { writer.isCoherent && reader.isCoherent })
        let level = try Self.level(cluster, namespace: namespace)
        let keys = (0..<40).map { "k\($0)" }
        for key in keys {
            try await Self.save("old", forKey: key, on: writer, heardBy: reader)
            #expect(try await reader.getOrFetch(forKey: key) == "old")
        }
        let replica = try cluster.server(try await cluster.replicas[0])
        let view = try await cluster.currentView()
        let primaryID = try #require(view.node(port: replica.port)?.primaryID)
        let primaryPort = try #require(view.node(id: primaryID)?.port)
        var moved: [String] = []
        for key in keys {
            if try await cluster.node(forSlot: ClusterSlot.of(level.storedKey(key))).port == primaryPort {
                moved.append(key)
            }
        }
        try #require(!moved.isEmpty)
        try await cluster.failover(replica: replica)
        let start = ContinuousClock.now
        for key in moved {
            try await writer.save("new", forKey: key)
            // The reader reads nothing from the cluster here: only its memory.
            #expect(await waitUntil(seconds: 600) { reader.memory?.peek(key)?.value != "old" }, "\(key)")
        }
        print("After CLUSTER FAILOVER, the reader dropped its copies within \(ContinuousClock.now - start)")
        for key in moved { #expect(try await reader.getOrFetch(forKey: key) == "new") }
    }
}

extension RedisClusterTests {
    /// Every string in a reply, however nested.
    static func texts(of reply: RESPValue) -> [String] {
        switch reply {
        case .array(let items), .map(let items), .push(let items): items.flatMap(texts(of:))
        default: reply.text.map { [$0] } ?? []
        }
    }

    /// A primary that refuses to track only after its subscription was made (its first answer came
    /// after the subscription stopped waiting) is asked again, with the tracking connection's
    /// backoff: once it lets the level track, the cache is coherent again.
    @Test func aPrimaryThatRefusedToTrackLateIsAskedAgain() async throws {
        let cluster = try await RedisTestCluster.start()
        let folder = TemporaryDirectory()
        let namespace = "refused-\(UUID().uuidString.prefix(8))"
        let seeds = Set(cluster.seedURLs.prefix(2))
        let victim = try #require(
            try await cluster.primaries.map { try cluster.server($0) }.first { !seeds.contains($0.url) }
        )
        _ = try await cluster.send(["ACL", "SETUSER", "default", "-client|tracking"], to: victim)
        _ = try await cluster.send(["ACL", "LOG", "RESET"], to: victim)
        // Its answers wait past what a subscription waits for (the connect and command timeouts, 2 s),
        // with room for a slow machine to make the cache before its subscription starts.
        _ = try await cluster.send(["CLIENT", "PAUSE", "8000", "ALL"], to: victim)
        let level = try Self.level(
            cluster,
            namespace: namespace,
            clientName: "reader",
            commandTimeout: .seconds(1),
            connectTimeout: .seconds(1)
        )
        let reader = try folder.stringBuilder("reader").sharedLevel(level)
            .coherence(.invalidations(maxLocalAge: .seconds(86_400), duringOutage: .serveLocalCopies)).build()
        // The refusal, once the pause is over.
        #expect(
            await waitUntilAsync {
                guard let log = try? await cluster.send(["ACL", "LOG"], to: victim) else { return false }
                return Self.texts(of: log).contains { $0.contains("tracking") }
            }
        )
        #expect(!reader.isCoherent)
        _ = try await cluster.send(["ACL", "SETUSER", "default", "+client|tracking"], to: victim)
        let tracking = reader.invalidations.withLock { $0 } as? ClusterTracking
        #expect(
            await waitUntil(seconds: 600) { reader.isCoherent },
            "\(tracking?.stateDescription ?? "no cluster tracking")"
        )
    }

    /// A node added to the cluster is tracked as soon as the map names it, before any slot moves to
    /// it: a write that reaches it through `ASK` mid-migration drops another cache's copy.
    @Test func aPrimaryAddedToTheClusterIsTrackedBeforeSlotsMoveToIt() async throws {
        let cluster = try await RedisTestCluster.start()
        let folder = TemporaryDirectory()
        let namespace = "grow-\(UUID().uuidString.prefix(8))"
        let writer = try Self.coherentCache(folder, "a", cluster, namespace: namespace)
        let readerLevel = try Self.level(cluster, namespace: namespace, clientName: "b")
        let reader = try folder.stringBuilder("b").sharedLevel(readerLevel)
            .coherence(.invalidations(maxLocalAge: .seconds(86_400), duringOutage: .serveLocalCopies)).build()
        #expect(await waitUntil { writer.isCoherent && reader.isCoherent })
        let level = try Self.level(cluster, namespace: namespace)

        let added = try RedisTestCluster.startNode()
        let admin = try RedisCacheLevel.patient(url: added.url, namespace: "admin", poolSize: 1)
        let portReply = try await admin.send(RESPCommand("CONFIG", ["GET", "cluster-port"]))
        guard case .map(let pair) = portReply, let busPort = pair.last?.text else {
            throw TestServerError("CONFIG GET cluster-port answered \(portReply)")
        }
        let addedID = try #require(try await admin.send(RESPCommand("CLUSTER", ["MYID"])).text)
        _ = try await cluster.send(["CLUSTER", "MEET", "127.0.0.1", String(added.port), busPort], to: cluster.nodes[0])
        let endpoint = RedisCacheLevel.Configuration.Endpoint(host: "127.0.0.1", port: Int(added.port))
        // The new primary joins the map with no slots; the reader tracks it (dropping its copies
        // once, as for any primary it did not track).
        #expect(
            await waitUntilAsync {
                let info = try? await admin.send(RESPCommand("CLUSTER", ["INFO"])).text
                return info?.contains("cluster_state:ok") == true
                    && readerLevel.nodes.router?.topology?.primaries.contains(endpoint) == true
            }
        )
        // A copy taken once the reader tracks the new primary too (the drop that its arrival makes
        // may come after a first read).
        let key = "k0"
        try await Self.save("old", forKey: key, on: writer, heardBy: reader)
        #expect(
            await waitUntilAsync {
                _ = try? await reader.getOrFetch(forKey: key)
                return reader.memory?.peek(key)?.value == "old" && reader.isCoherent
            }
        )

        // Its slot starts moving to the new node, and the key moves first.
        let name = level.storedKey(key)
        let slot = ClusterSlot.of(name)
        let source = try await cluster.node(forSlot: slot)
        let sourceID = try await cluster.id(of: source)
        _ = try await admin.send(RESPCommand("CLUSTER", ["SETSLOT", String(slot), "IMPORTING", sourceID]))
        _ = try await cluster.send(["CLUSTER", "SETSLOT", String(slot), "MIGRATING", addedID], to: source)
        var migrate = RESPCommand("MIGRATE", arguments: 7)
        for argument in ["127.0.0.1", String(added.port), "", "0", "5000", "KEYS"] { migrate.append(argument) }
        migrate.append(name)
        _ = try await cluster.send(migrate, to: source)
        // The move's removal from the source drops the reader's copy; it reads the key again, from
        // the new node (through ASK).
        #expect(
            await waitUntilAsync {
                _ = try? await reader.getOrFetch(forKey: key)
                return reader.memory?.peek(key)?.value == "old"
            }
        )

        // The writer's save reaches the new node through ASK; the reader hears of it from there
        // only.
        try await writer.save("new", forKey: key)
        #expect(await waitUntil(seconds: 600) { reader.memory?.peek(key)?.value != "old" })
        #expect(try await reader.getOrFetch(forKey: key) == "new")
        withExtendedLifetime(added) {}
    }

    /// A value stored with its lease ended, and a removal with it, go through while their slot is
    /// half migrated, although the server refuses a command of two keys there when one is missing;
    /// whatever the limit of redirections, which such a command reaches going back and forth
    /// between the slot's source (`ASK`) and its target (`TRYAGAIN`).
    @Test(arguments: [5, 2])
    func writesThatEndALeaseGoThroughAHalfMigratedSlot(maximumRedirections: Int) async throws {
        let cluster = try await RedisTestCluster.start()
        let namespace = "lease-move-\(UUID().uuidString.prefix(8))"
        let level = try Self.level(cluster, namespace: namespace, maximumRedirections: maximumRedirections)
        let slot = ClusterSlot.of(level.storedKey("seed"))
        var keys: [String] = []
        var index = 0
        while keys.count < 20 {
            if ClusterSlot.of(level.storedKey("k\(index)")) == slot { keys.append("k\(index)") }
            index += 1
        }
        for key in keys.prefix(10) { try await level.set(Data("old".utf8), forKey: key) }
        let source = try await cluster.node(forSlot: slot)
        let destination = try await cluster.primaries.map { try cluster.server($0) }.first { $0.port != source.port }!
        let migration = try await cluster.startMigration(slot: slot, from: source, to: destination)
        for key in keys {
            try await level.setEndingLease(Data("new".utf8), forKey: key, expiresAt: nil)
            #expect(try await level.get(key) == Data("new".utf8))
            #expect(try await level.takeLease(forKey: key, token: "t", duration: .seconds(3_600)))
            try await level.removeValueEndingLease(forKey: key)
            await #expect(throws: CacheError.notFound(key: key)) { try await level.get(key) }
            #expect(try await level.takeLease(forKey: key, token: "u", duration: .seconds(3_600)))
        }
        try await cluster.finishMigration(migration)
    }

    /// The keys of a half-migrated slot, which the cluster refuses to read in one `MGET` (`TRYAGAIN`),
    /// are read one by one; one of those reads that fails fails the slot's keys, as a failed `MGET`
    /// does, rather than count as a miss: a batch get then throws the server's error, not
    /// `notFound`.
    @Test func aHalfMigratedSlotsKeysThatCannotBeReadOneByOneAreNotMisses() async throws {
        let cluster = try await RedisTestCluster.start()
        let namespace = "split-read-\(UUID().uuidString.prefix(8))"
        let level = try Self.level(cluster, namespace: namespace)
        let slot = ClusterSlot.of(level.storedKey("seed"))
        var keys: [String] = []
        var index = 0
        while keys.count < 20 {
            if ClusterSlot.of(level.storedKey("k\(index)")) == slot { keys.append("k\(index)") }
            index += 1
        }
        for key in keys { try await level.set(Data(key.utf8), forKey: key) }
        let source = try await cluster.node(forSlot: slot)
        let destination = try await cluster.primaries.map { try cluster.server($0) }.first { $0.port != source.port }!
        let migration = try await cluster.startMigration(slot: slot, from: source, to: destination)
        #expect(!migration.movedKeys.isEmpty && migration.movedKeys.count < keys.count)
        // A user who may read many keys at once but not one: every read of a key alone is refused.
        for node in cluster.liveNodes {
            _ = try await cluster.send(
                ["ACL", "SETUSER", "batch-only", "on", ">secret", "~*", "+@all", "-get"],
                to: node
            )
        }
        var configuration = level.configuration
        configuration.username = "batch-only"
        configuration.password = "secret"
        let reader = try RedisCacheLevel(configuration, namespace: namespace)
        await #expect(throws: CacheError.self) { try await reader.get(keys[0]) }
        do {
            _ = try await reader.allBatch().get(keys)
            Issue.record("a batch get of a slot whose keys cannot be read returned")
        } catch let error as CacheError {
            #expect(error.code == .serverRefused, "\(error)")
        }
        try await cluster.finishMigration(migration)
    }

    /// A clear while a slot is half migrated removes the slot's keys on both sides (those the
    /// source still holds, and those already on the destination, which only `ASKING` reaches), and
    /// no key of another namespace.
    @Test func aClearRemovesBothSidesOfAHalfMigratedSlot() async throws {
        let cluster = try await RedisTestCluster.start()
        let namespace = "clear-move-\(UUID().uuidString.prefix(8))"
        let level = try Self.level(cluster, namespace: namespace)
        let other = try Self.level(cluster, namespace: "\(namespace)-other")
        let slot = ClusterSlot.of(level.storedKey("seed"))
        var keys: [String] = []
        var index = 0
        while keys.count < 20 {
            if ClusterSlot.of(level.storedKey("k\(index)")) == slot { keys.append("k\(index)") }
            index += 1
        }
        for key in keys {
            try await level.set(Data(key.utf8), forKey: key)
            try await other.set(Data(key.utf8), forKey: key)
        }
        let source = try await cluster.node(forSlot: slot)
        let destination = try await cluster.primaries.map { try cluster.server($0) }.first { $0.port != source.port }!
        let migration = try await cluster.startMigration(slot: slot, from: source, to: destination)
        #expect(!migration.movedKeys.isEmpty && migration.movedKeys.count < keys.count)
        try await level.removeAll()
        for node in [source, destination] {
            let reply = try await cluster.send(["KEYS", "\(namespace):*"], to: node)
            guard case .array(let found) = reply else { throw TestServerError("KEYS answered \(reply)") }
            #expect(found.isEmpty, "\(node.port) kept \(found.count) of the namespace's keys")
        }
        #expect(try await other.values(forKeys: keys) == keys.map { Data($0.utf8) })
        try await cluster.finishMigration(migration)
    }

    /// A subscriber may cancel its subscription from its own handler (a cache released while it
    /// hears an event does): nothing waits on itself, and the cluster's tracking goes on for others.
    @Test func aSubscriberMayCancelFromItsHandler() async throws {
        let cluster = try await RedisTestCluster.start()
        let namespace = "cancel-\(UUID().uuidString.prefix(8))"
        let level = try Self.level(cluster, namespace: namespace, clientName: "cancel")
        let subscription = Locked<(any InvalidationSubscription)?>(nil)
        let heard = Locked(0)
        let made = try level.subscribeToInvalidations { event in
            guard case .keys = event else { return }
            heard.withLock { $0 += 1 }
            subscription.withLock { $0 }?.cancel()
        }
        subscription.withLock { $0 = made }
        try await level.set(Data("v".utf8), forKey: "k")
        #expect(await waitUntil { heard.withLock { $0 } == 1 })
        // Another subscriber of the same connections still hears every change.
        let others = Locked(0)
        let other = try level.subscribeToInvalidations { event in
            if case .keys = event { others.withLock { $0 += 1 } }
        }
        for index in 0..<20 { try await level.set(Data("v".utf8), forKey: "k\(index)") }
        #expect(await waitUntil { others.withLock { $0 } >= 20 })
        #expect(heard.withLock { $0 } == 1)
        other.cancel()
    }
}
