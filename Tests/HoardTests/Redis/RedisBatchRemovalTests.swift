import Foundation
import Hoard
import Testing

@testable import HoardRedis

/// `RedisCacheLevel.allBatch()`'s removals, against a real server on 127.0.0.1.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason))
struct RedisBatchRemovalTests {
    @Test func aBatchRemovalSendsEveryKeyWithoutWaitingForTheRepliesBeforeIt() async throws {
        let server = try RedisTestServer.required()
        let proxy = try HoldingProxy(upstreamPort: server.port)
        defer { proxy.release() }
        let namespace = "batch-removal-\(UUID().uuidString)"
        let direct = try RedisCacheLevel.patient(url: server.url, namespace: namespace)
        // Through the proxy, with time enough that the held reply cannot time out first.
        let held = try RedisCacheLevel(
            url: "redis://127.0.0.1:\(proxy.port)",
            namespace: namespace,
            poolSize: 2,
            connectTimeout: .seconds(600),
            commandTimeout: .seconds(600)
        )
        let keys = ["first-of-three", "second-of-three", "third-of-three"]
        for key in keys { try await direct.set(Data(key.utf8), forKey: key) }
        try await held.ping()

        proxy.holdReplies(toRequestContaining: "first-of-three")
        let removal = Task { try await held.allBatch().removeValue(forKey: keys) }
        #expect(await waitUntil { proxy.held > 0 })
        // The first key's reply is held: the other keys' removals reach the server all the same.
        let deadline = ContinuousClock.now + .seconds(120)
        var left = try await direct.values(forKeys: Array(keys.dropFirst()))
        while left != [nil, nil] && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
            left = try await direct.values(forKeys: Array(keys.dropFirst()))
        }
        #expect(left == [nil, nil])
        proxy.release()
        try await removal.value
        #expect(try await direct.values(forKeys: keys) == [nil, nil, nil])
    }
}
