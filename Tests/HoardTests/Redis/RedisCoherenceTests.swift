import Foundation
import HoardTestSupport
import Testing

@testable import Hoard
@testable import HoardRedis

/// `coherence(.invalidations)` over a real server: two caches on separate connections, a read whose
/// reply is held while the other writes, a killed tracking connection, `FLUSHALL`, a restart, and
/// servers that cannot track.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason), .timeLimit(.minutes(10)))
struct RedisCoherenceTests {
    init() { TestLog.install() }

    /// A coherent cache on its own level (its own data connections) at `port`, named so that the
    /// test can find its tracking connection.
    static func coherentCache(
        _ folder: TemporaryDirectory,
        _ container: String,
        port: UInt16,
        namespace: String,
        clientName: String,
        pingInterval: Duration = .seconds(1),
        pingTimeout: Duration = .seconds(600),
        commandTimeout: Duration = .seconds(10),
        duringOutage: CacheCoherence.Outage = .serveLocalCopies,
        fetcher: (@Sendable (String) async throws -> String)? = nil
    ) throws -> Cache<String> {
        let level = try Self.level(
            port: port,
            namespace: namespace,
            clientName: clientName,
            pingInterval: pingInterval,
            pingTimeout: pingTimeout,
            commandTimeout: commandTimeout
        )
        // A day, not the default minute: a loaded run can stall a test for more than a minute between
        // a fill and the read of its copy.
        var builder = folder.stringBuilder(container).sharedLevel(level)
            .coherence(.invalidations(maxLocalAge: .seconds(86_400), duringOutage: duringOutage))
        if let fetcher { builder = builder.fetcher(fetcher) }
        return try builder.build()
    }

    /// A level with its own data connection at `port`, whose tracking connection is named
    /// `<clientName>-tracking`.
    ///
    /// The ping timeout is ten minutes unless told: a loaded run (ThreadSanitizer on two cores) must
    /// not count the tracking connection lost, which drops the local copies the tests look at; a
    /// test about that timeout sets a short one.
    static func level(
        port: UInt16,
        namespace: String,
        clientName: String,
        pingInterval: Duration = .seconds(1),
        pingTimeout: Duration = .seconds(600),
        commandTimeout: Duration = .seconds(10)
    ) throws -> RedisCacheLevel {
        var configuration = RedisCacheLevel.Configuration(host: "127.0.0.1", port: Int(port))
        configuration.clientName = clientName
        configuration.trackingPingInterval = pingInterval
        configuration.trackingPingTimeout = pingTimeout
        configuration.commandTimeout = commandTimeout
        configuration.connectTimeout = .seconds(10)
        configuration.poolSize = 1
        return try RedisCacheLevel(configuration, namespace: namespace)
    }

    /// A level for the test's own commands.
    static func admin(_ port: UInt16) throws -> RedisCacheLevel {
        try RedisCacheLevel(url: "redis://127.0.0.1:\(port)", namespace: "admin", commandTimeout: .seconds(10))
    }

    /// The ids of the server's tracking connections named `<clientName>-tracking`.
    static func trackingClients(_ admin: RedisCacheLevel, _ clientName: String) async throws -> [String] {
        let list = try await admin.send(RESPCommand("CLIENT", ["LIST"])).bytes ?? Data()
        return String(decoding: list, as: UTF8.self).split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.contains(where: { $0 == "name=\(clientName)-tracking" }) else { return nil }
            return fields.first { $0.hasPrefix("id=") }.map { String($0.dropFirst(3)) }
        }
    }

    /// Saves `value` on `writer` and waits until `reader` has heard of it: a fill the reader starts
    /// after that is installed (one started before is not, as its reply may predate the write).
    static func save(
        _ value: String,
        forKey key: String,
        on writer: Cache<String>,
        heardBy reader: Cache<String>
    ) async throws {
        let heard = reader.statistics.invalidations
        try await writer.save(value, forKey: key)
        #expect(await waitUntil { reader.statistics.invalidations > heard })
    }

    @Test func aSetOrRemovalOnOneCacheDropsTheOthersCopyAndItsNextReadIsNew() async throws {
        let server = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let namespace = "coherent-\(UUID().uuidString)"
        let name = "coh-\(UUID().uuidString.prefix(8))"
        let first = try Self.coherentCache(folder, "a", port: server.port, namespace: namespace, clientName: name)
        let second = try Self.coherentCache(folder, "b", port: server.port, namespace: namespace, clientName: name)
        #expect(await waitUntil { first.isCoherent && second.isCoherent })
        // Two caches of one namespace in one process share one tracking connection.
        #expect(try await Self.trackingClients(try Self.admin(server.port), name).count == 1)
        var latencies: [Duration] = []
        for round in 0..<200 {
            let key = "k\(round % 5)"
            try await Self.save("old \(round)", forKey: key, on: first, heardBy: second)
            #expect(try await second.getOrFetch(forKey: key) == "old \(round)")
            #expect(second.entry(forKey: key)?.value == "old \(round)")
            try await first.save("new \(round)", forKey: key)
            let saved = ContinuousClock.now
            #expect(await waitUntil { second.memory?.peek(key)?.value != "old \(round)" })
            latencies.append(saved.duration(to: .now))
            #expect(try await second.getOrFetch(forKey: key) == "new \(round)")
            first.removeValue(forKey: key)
            await first.flush()
            #expect(await waitUntil { second.memory?.peek(key) == nil })
            await #expect(throws: CacheError.self) { try await second.getOrFetch(forKey: key) }
            #expect(second[key] == nil)
        }
        #expect(second.statistics.invalidations >= 400)
        latencies.sort()
        print(
            "Invalidation latency over \(latencies.count) sets: p50 \(latencies[latencies.count / 2]), "
                + "p99 \(latencies[latencies.count * 99 / 100]), max \(latencies[latencies.count - 1])"
        )
    }

    @Test func ownConfirmedSavesStayInMemoryAndOnDiskAndAnotherInstancesWriteStillDropsThem() async throws {
        let server = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let namespace = "own-saves-\(UUID().uuidString)"
        let name = "own-\(UUID().uuidString.prefix(8))"
        let writer = try Self.coherentCache(folder, "a", port: server.port, namespace: namespace, clientName: name)
        let other = try Self.coherentCache(folder, "b", port: server.port, namespace: namespace, clientName: name)
        #expect(await waitUntil { writer.isCoherent && other.isCoherent })
        let keys = (0..<50).map { "k\($0)" }
        for key in keys { try await writer.save("mine \(key)", forKey: key) }
        // Every echo has come once the other cache (told after the writer: it subscribed later)
        // has heard of all 50 keys, and been checked once no check is under way.
        #expect(await waitUntil { other.statistics.invalidations >= 50 && writer.echoChecksUnderWay == 0 })
        await writer.flush()
        for key in keys { #expect(writer.memory?.peek(key)?.value == "mine \(key)", "\(key)") }
        #expect(writer.statistics.diskCount == 50)
        #expect(folder.entryFiles(in: "a").count == 50)
        // The other instance's write of one key drops the writer's copies of it, and only of it.
        try await Self.save("theirs", forKey: "k7", on: other, heardBy: writer)
        #expect(await waitUntil { writer.echoChecksUnderWay == 0 && writer.memory?.peek("k7") == nil })
        await writer.flush()
        #expect(writer.statistics.diskCount == 49)
        #expect(try await writer.getOrFetch(forKey: "k7") == "theirs")
        #expect(writer.memory?.peek("k8")?.value == "mine k8")
    }

    @Test func theTrackingConnectionIsSharedAndClosesWithTheLastCacheOnIt() async throws {
        let server = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let namespace = "shared-\(UUID().uuidString)"
        let name = "shared-\(UUID().uuidString.prefix(8))"
        let admin = try Self.admin(server.port)
        var first: Cache<String>? = try Self.coherentCache(
            folder,
            "a",
            port: server.port,
            namespace: namespace,
            clientName: name
        )
        var second: Cache<String>? = try Self.coherentCache(
            folder,
            "b",
            port: server.port,
            namespace: namespace,
            clientName: name
        )
        #expect(await waitUntil { first?.isCoherent == true && second?.isCoherent == true })
        #expect(try await Self.trackingClients(admin, name).count == 1)
        first = nil
        #expect(try await Self.trackingClients(admin, name).count == 1)
        #expect(second?.isCoherent == true)
        second = nil
        var remaining = 1
        for _ in 0..<10_000 where remaining > 0 {
            remaining = try await Self.trackingClients(admin, name).count
            if remaining > 0 { try await Task.sleep(for: .milliseconds(5)) }
        }
        #expect(remaining == 0)
    }

    @Test func aReadWhoseReplyIsHeldWhileAnotherInstanceWritesDoesNotInstallTheOldValue() async throws {
        let server = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let namespace = "race-\(UUID().uuidString)"
        let proxy = try HoldingProxy(upstreamPort: server.port)
        let writer = try Self.coherentCache(folder, "a", port: server.port, namespace: namespace, clientName: "race-a")
        // The reader's reads are held while the writer saves and the reader hears of it, which a
        // loaded sanitizer run stretched past 10 s: a read that times out is a miss, not "old".
        let reader = try Self.coherentCache(
            folder,
            "b",
            port: proxy.port,
            namespace: namespace,
            clientName: "race-b",
            commandTimeout: .seconds(300)
        )
        #expect(await waitUntil { writer.isCoherent && reader.isCoherent })
        for round in 0..<20 {
            let key = "k\(round)"
            try await Self.save("old", forKey: key, on: writer, heardBy: reader)
            proxy.holdReplies(toRequestContaining: key)
            let read = Task { try await reader.getOrFetch(forKey: key) }
            #expect(await waitUntil { proxy.held > 0 })
            // The old value is on its way to the reader; the writer replaces it, and the reader
            // hears of it (on its tracking connection, which the proxy does not hold).
            try await Self.save("new", forKey: key, on: writer, heardBy: reader)
            proxy.release()
            #expect(try await read.value == "old")
            await reader.flush()
            #expect(reader.entry(forKey: key) == nil)
            #expect(try await reader.getOrFetch(forKey: key) == "new")
        }
    }

    @Test func aServerWithoutRESP3OrTrackingMakesBuildThrowUnlessTTLOnlyIsAskedFor() async throws {
        _ = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        for renamed in ["HELLO", "CLIENT"] {
            let server = try RedisTestServer.start(configuration: ["rename-command \(renamed) \"\""])
            // build() waits for the tracking handshake for the two timeouts: a loaded run's answer
            // must come within them.
            let level = try RedisCacheLevel(
                url: server.url,
                namespace: "n",
                connectTimeout: .seconds(30),
                commandTimeout: .seconds(30)
            )
            let error = #expect(throws: CacheError.self) {
                try folder.stringBuilder(renamed).sharedLevel(level).coherence(.invalidations).build()
            }
            #expect(error?.code == .invalidConfiguration)
            #expect(
                error?.message.contains(renamed == "HELLO" ? "RESP3" : "CLIENT TRACKING") == true,
                "\(error?.message ?? "")"
            )
            #expect(error?.message.contains(".ttlOnly(maxAge:)") == true)
            let fallback = try folder.stringBuilder(renamed).sharedLevel(level)
                .coherence(.ttlOnly(maxAge: .seconds(3600))).build()
            // A maximum age no loaded machine outlasts between the save and the read (a sanitizer
            // run once took longer than half a minute over the save).
            try await fallback.save("v", forKey: "k")
            #expect(fallback["k"] == "v")
        }
    }
}
