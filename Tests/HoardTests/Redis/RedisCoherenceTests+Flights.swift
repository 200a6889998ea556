import Foundation
import HoardTestSupport
import Testing

@testable import Hoard
@testable import HoardRedis

/// Request pooling against a real server: a read that begins once the reader has applied another
/// instance's write must not join a read sent before that write, and return what it read.
extension RedisCoherenceTests {
    @Test func aReadBegunAfterTheAnnouncementDoesNotWaitForAReadSentBeforeTheWrite() async throws {
        let server = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let namespace = "flights-\(UUID().uuidString)"
        let proxy = try HoldingProxy(upstreamPort: server.port)
        let writer = try Self.coherentCache(
            folder,
            "a",
            port: server.port,
            namespace: namespace,
            clientName: "flights-a"
        )
        let reader = try Self.coherentCache(
            folder,
            "b",
            port: proxy.port,
            namespace: namespace,
            clientName: "flights-b",
            commandTimeout: .seconds(300)
        )
        #expect(await waitUntil { writer.isCoherent && reader.isCoherent })
        for round in 0..<5 {
            let key = "k\(round)"
            try await Self.save("old", forKey: key, on: writer, heardBy: reader)
            proxy.holdReplies(toRequestContaining: key)
            let first = Task { try await reader.getOrFetch(forKey: key) }
            #expect(await waitUntil { proxy.held > 0 })
            // The writer replaces the value, and the reader applies the announcement.
            try await Self.save("new", forKey: key, on: writer, heardBy: reader)
            // Only now does this read begin: it must not be handed the old value.
            let follower = Task { try await reader.getOrFetch(forKey: key) }
            #expect(await waitUntil { reader.flights.waiterCount(forKey: key) == 2 || proxy.held > 1 })
            proxy.release()
            #expect(["old", "new"].contains(try await first.value))
            let followerSaw = try await follower.value
            #expect(followerSaw == "new", "round \(round)")
        }
    }
}
