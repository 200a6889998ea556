import Foundation
import HoardTestSupport
import Testing

@testable import Hoard
@testable import HoardRedis

/// Losses of tracking: a killed tracking connection, a killed server, a missed ping deadline,
/// `FLUSHALL` and a restart; local copies go and tracking resumes.
extension RedisCoherenceTests {
    @Test func killingTheTrackingConnectionFlushesRefusesFillsUntilItTracksAgain() async throws {
        let server = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let namespace = "kill-\(UUID().uuidString)"
        let name = "kill-\(UUID().uuidString.prefix(8))"
        let proxy = try HoldingProxy(upstreamPort: server.port)
        let writer = try Self.coherentCache(folder, "a", port: server.port, namespace: namespace, clientName: "kill-a")
        let reader = try Self.coherentCache(
            folder,
            "b",
            port: proxy.port,
            namespace: namespace,
            clientName: name,
            duringOutage: .bypassLocalCopies
        )
        #expect(await waitUntil { writer.isCoherent && reader.isCoherent })
        try await Self.save("v1", forKey: "k", on: writer, heardBy: reader)
        #expect(try await reader.getOrFetch(forKey: "k") == "v1")
        #expect(reader.entry(forKey: "k")?.value == "v1")

        // The reader's tracking connection is killed, and cannot come back for now.
        proxy.cut(connectionsSending: "TRACKING")
        let admin = try Self.admin(server.port)
        let ids = try await Self.trackingClients(admin, name)
        #expect(ids.count == 1)
        for id in ids { _ = try await admin.send(RESPCommand("CLIENT", ["KILL", "ID", id])) }
        #expect(await waitUntil { reader.statistics.coherenceFlushes == 1 })
        #expect(reader.entry(forKey: "k") == nil)
        #expect(!reader.isCoherent)
        // Fills are refused: reads go to the server and see every write.
        try await writer.save("v2", forKey: "k")
        #expect(try await reader.getOrFetch(forKey: "k") == "v2")
        #expect(reader.entry(forKey: "k") == nil)
        try await writer.save("v3", forKey: "k")
        #expect(try await reader.getOrFetch(forKey: "k") == "v3")

        // Once it tracks again, fills resume, and the next write drops them.
        proxy.cut(connectionsSending: nil)
        #expect(await waitUntil { reader.isCoherent })
        #expect(try await Self.trackingClients(admin, name).count == 1)
        #expect(try await reader.getOrFetch(forKey: "k") == "v3")
        await reader.flush()
        #expect(reader.entry(forKey: "k")?.value == "v3")
        try await writer.save("v4", forKey: "k")
        #expect(await waitUntil { reader.memory?.peek("k") == nil })
        #expect(try await reader.getOrFetch(forKey: "k") == "v4")
    }

    @Test func duringAKilledServersOutageLocalCopiesServeAndGoOnceTrackingIsBack() async throws {
        _ = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        var server = try RedisTestServer.start()
        let port = server.port
        let fetches = Protected(0)
        let reader = try Self.coherentCache(
            folder,
            "b",
            port: port,
            namespace: "n",
            clientName: "outage-b"
        ) { key in
            fetches.withLock { $0 += 1 }
            return "origin \(key)"
        }
        let writer = try Self.coherentCache(folder, "a", port: port, namespace: "n", clientName: "outage-a")
        #expect(await waitUntil { writer.isCoherent && reader.isCoherent })
        // A cache whose first confirmation came after build() returned dropped what it kept until
        // then: counted from here.
        let flushes = reader.statistics.coherenceFlushes
        try await Self.save("v1", forKey: "k", on: writer, heardBy: reader)
        #expect(try await reader.getOrFetch(forKey: "k") == "v1")
        await reader.flush()

        // kill -9: the tracking connection is lost, and so is the server.
        server.kill()
        #expect(await waitUntil { Self.hasLost(reader) })
        for _ in 0..<20 { #expect(try await reader.getOrFetch(forKey: "k") == "v1") }
        #expect(fetches.withLock { $0 } == 0)
        // A key first read during the outage reaches the origin once, then is served locally.
        for _ in 0..<20 { #expect(try await reader.getOrFetch(forKey: "other") == "origin other") }
        #expect(fetches.withLock { $0 } == 1)
        #expect(reader.statistics.coherenceFlushes == flushes)

        // The restarted server has lost everything; once tracking is back, what was kept goes.
        server = try await eventually { try RedisTestServer.start(port: port) }
        #expect(await waitUntil { reader.statistics.coherenceFlushes == flushes + 1 && reader.isCoherent })
        #expect(reader.entry(forKey: "k") == nil)
        #expect(reader.entry(forKey: "other") == nil)
        server.kill()
    }

    /// Whether the reader heard of the loss (its copies are kept, to be dropped on return).
    private static func hasLost(_ cache: Cache<String>) -> Bool { cache.outage.withLock { $0.dropsOnReturn } }

    @Test func aTrackingConnectionThatMissesItsPingDeadlineCountsAsLost() async throws {
        let server = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let namespace = "ping-\(UUID().uuidString)"
        let proxy = try HoldingProxy(upstreamPort: server.port)
        let writer = try Self.coherentCache(folder, "a", port: server.port, namespace: namespace, clientName: "ping-a")
        let reader = try Self.coherentCache(
            folder,
            "b",
            port: proxy.port,
            namespace: namespace,
            clientName: "ping-b",
            pingInterval: .milliseconds(50),
            // Long enough that a slow answer is not a loss; the held ping below is held for good.
            pingTimeout: .seconds(5)
        )
        #expect(await waitUntil { writer.isCoherent && reader.isCoherent })
        let flushes = reader.statistics.coherenceFlushes
        try await Self.save("v1", forKey: "k", on: writer, heardBy: reader)
        #expect(try await reader.getOrFetch(forKey: "k") == "v1")
        #expect(reader.entry(forKey: "k")?.value == "v1")
        // The server goes silent on the tracking connection (its pings get no answer): the
        // connection counts as lost once the ping timeout passes; the copies are dropped once a
        // new connection tracks again (the proxy holds only pings, so it does at once).
        proxy.holdReplies(toRequestContaining: "PING")
        #expect(await waitUntil { reader.statistics.coherenceFlushes == flushes + 1 })
        #expect(reader.entry(forKey: "k") == nil)
        proxy.release()
        #expect(await waitUntil { reader.isCoherent })
        try await Self.save("v2", forKey: "k", on: writer, heardBy: reader)
        #expect(try await reader.getOrFetch(forKey: "k") == "v2")
        await reader.flush()
        #expect(reader.entry(forKey: "k")?.value == "v2")
    }

    @Test func aFlushAllAndARestartDropEveryLocalCopyAndTrackingResumes() async throws {
        _ = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        var server = try RedisTestServer.start()
        let port = server.port
        let writer = try Self.coherentCache(folder, "a", port: port, namespace: "n", clientName: "restart-a")
        let reader = try Self.coherentCache(
            folder,
            "b",
            port: port,
            namespace: "n",
            clientName: "restart-b",
            duringOutage: .bypassLocalCopies
        )
        #expect(await waitUntil { writer.isCoherent && reader.isCoherent })
        try await Self.save("v1", forKey: "k", on: writer, heardBy: reader)
        #expect(try await reader.getOrFetch(forKey: "k") == "v1")
        await reader.flush()
        #expect(reader.entry(forKey: "k") != nil)

        _ = try await Self.admin(port).send(RESPCommand("FLUSHALL", []))
        #expect(await waitUntil { reader.statistics.coherenceFlushes == 1 })
        #expect(reader.entry(forKey: "k") == nil)
        await #expect(throws: CacheError.self) { try await reader.getOrFetch(forKey: "k") }
        #expect(await waitUntil { reader.isCoherent })
        try await Self.save("v2", forKey: "k", on: writer, heardBy: reader)
        #expect(try await reader.getOrFetch(forKey: "k") == "v2")
        await reader.flush()
        #expect(reader.entry(forKey: "k")?.value == "v2")

        // A restart loses every value and every tracking connection.
        server.kill()
        #expect(await waitUntil { reader.statistics.coherenceFlushes == 2 })
        #expect(reader.entry(forKey: "k") == nil)
        server = try await eventually { try RedisTestServer.start(port: port) }
        #expect(await waitUntil { reader.isCoherent && writer.isCoherent })
        // The data connections come back on their own schedule (their backoff); wait for them with
        // reads (a write would send an invalidation that could race the fills below).
        func isBack(_ cache: Cache<String>) async -> Bool {
            let errors = cache.statistics.sharedErrors
            _ = try? await cache.getOrFetch(forKey: "probe")
            return cache.statistics.sharedErrors == errors
        }
        var isBothBack = false
        for _ in 0..<10_000 where !isBothBack {
            let isWriterBack = await isBack(writer)
            isBothBack = await isBack(reader) && isWriterBack
            if !isBothBack { try await Task.sleep(for: .milliseconds(5)) }
        }
        #expect(isBothBack)
        try await Self.save("v3", forKey: "k", on: writer, heardBy: reader)
        #expect(try await reader.getOrFetch(forKey: "k") == "v3")
        await reader.flush()
        #expect(reader.entry(forKey: "k")?.value == "v3")
        try await writer.save("v4", forKey: "k")
        #expect(await waitUntil { reader.memory?.peek("k") == nil })
        #expect(try await reader.getOrFetch(forKey: "k") == "v4")
        _ = server
    }
}
