import Foundation
import HoardTestSupport
import Testing

@testable import Hoard
@testable import HoardRedis

/// `contains` and `allKeys` against a real server: from a lost tracking connection to its return,
/// a cache that bypasses its local copies contains nothing its disk holds, as it reads nothing from it.
extension RedisCoherenceTests {
    @Test func afterAKilledTrackingConnectionContainsAgreesWithReadsUntilTrackingIsBack() async throws {
        let server = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let namespace = "readlike-\(UUID().uuidString)"
        let name = "readlike-\(UUID().uuidString.prefix(8))"
        let proxy = try HoldingProxy(upstreamPort: server.port)
        let writer = try Self.coherentCache(
            folder,
            "a",
            port: server.port,
            namespace: namespace,
            clientName: "readlike-a"
        )
        let reader = try Self.coherentCache(
            folder,
            "b",
            port: proxy.port,
            namespace: namespace,
            clientName: name,
            duringOutage: .bypassLocalCopies
        )
        #expect(await waitUntil { writer.isCoherent && reader.isCoherent && !reader.isClearingDisk })
        try await Self.save("v1", forKey: "k", on: writer, heardBy: reader)
        #expect(try await reader.getOrFetch(forKey: "k") == "v1")
        await reader.flush()
        #expect(reader.contains("k"))
        #expect(reader.allKeys == ["k"])

        // The reader's tracking connection is killed, and cannot come back for now.
        proxy.cut(connectionsSending: "TRACKING")
        let admin = try Self.admin(server.port)
        for id in try await Self.trackingClients(admin, name) {
            _ = try await admin.send(RESPCommand("CLIENT", ["KILL", "ID", id]))
        }
        #expect(await waitUntil { reader.statistics.coherenceFlushes == 1 })
        #expect(!reader.contains("k"))
        #expect(await waitUntil { !reader.isClearingDisk })
        // Another process on the reader's container stores a value meanwhile; the server changes.
        let peer = try folder.stringBuilder("b").build()
        peer["k"] = "v1"
        await peer.flush()
        try await writer.save("v2", forKey: "k")
        #expect(reader.value(forKey: "k") == nil)
        #expect(!reader.contains("k"))
        #expect(reader.allKeys.isEmpty)
        #expect(try await reader.getOrFetch(forKey: "k") == "v2")

        // Once it tracks again, its disk serves again, and both say the same.
        proxy.cut(connectionsSending: nil)
        #expect(await waitUntil { reader.isCoherent })
        #expect(reader.contains("k") == (reader.value(forKey: "k") != nil))
    }
}
