import Foundation
import HoardTestSupport
import Testing

@testable import Hoard
@testable import HoardRedis

/// `fleetSingleFetch` on a real server: a caller cancelled while the reply to its lease request is
/// in flight.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason), .timeLimit(.minutes(10)))
struct RedisLeaseCancellationTests {
    init() { TestLog.install() }

    /// A caller cancelled while its lease reply is in flight leaves no lease on the server.
    ///
    /// The server runs `SET <lease> <token> NX PX`; its reply is held (by a proxy) while the caller
    /// is cancelled. `RedisPool.send` finishes the request with `CancellationError`, so the cache
    /// never learns it holds the lease, never fetches, and never releases it: every other instance
    /// that misses the key waits its whole wait limit (or the lease's duration) for nothing.
    @Test func aCallerCancelledWhileItsLeaseReplyIsInFlightLeavesNoLeaseOnTheServer() async throws {
        let server = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let namespace = "seam-\(UUID().uuidString)"
        let proxy = try HoldingProxy(upstreamPort: server.port)
        let cancelled = try RedisLeaseTests.instance(
            folder,
            "a",
            url: "redis://127.0.0.1:\(proxy.port)",
            namespace: namespace,
            leaseDuration: .seconds(3_600),
            waitLimit: .seconds(3_600),
            // The held reply is never given up on before the cancellation, however slow the run.
            commandTimeout: .seconds(600)
        ) { _ in "fetched by the cancelled caller" }
        let direct = try RedisCacheLevel.patient(url: server.url, namespace: namespace)
        proxy.holdReplies(toRequestContaining: "NX")
        let call = Task { try await cancelled.getOrFetch(forKey: "k") }
        #expect(await waitUntil { proxy.held > 0 })
        // The server granted the lease; its reply is held.
        #expect(try await RedisLeaseTests.exists(direct.leaseKey("k"), on: direct))
        call.cancel()
        await #expect(throws: CancellationError.self) { try await call.value }
        proxy.release()
        #expect(
            await waitUntilAsync(seconds: 600) {
                (try? await RedisLeaseTests.exists(direct.leaseKey("k"), on: direct)) == false
            }
        )
        // Another instance that misses the key fetches at once, not after its wait limit (an hour).
        let other = try RedisLeaseTests.instance(
            folder,
            "b",
            url: server.url,
            namespace: namespace,
            leaseDuration: .seconds(3_600),
            waitLimit: .seconds(3_600)
        ) { _ in "fetched by the other" }
        let otherCall = Task { try await other.getOrFetch(forKey: "k") }
        let finished = Protected<String?>(nil)
        Task {
            let value = (try? await otherCall.value) ?? "failed"
            finished.withLock { $0 = value }
        }
        #expect(await waitUntil { finished.withLock { $0 } != nil })
        otherCall.cancel()
        #expect(finished.withLock { $0 } == "fetched by the other")
    }
}
