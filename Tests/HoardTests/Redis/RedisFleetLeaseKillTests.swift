import Foundation
import HoardRedis
import HoardTestSupport
import Testing

@testable import Hoard

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A process of a fleet with `fleetSingleFetch` killed with `SIGKILL` while it holds a key's lease.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason), .timeLimit(.minutes(10)))
struct RedisFleetLeaseKillTests {
    /// The holder dies in its fetch; a waiter whose wait limit (an hour) is longer than the test may
    /// run (ten minutes) ends only by taking the expired lease over: it fetches once, its value reaches the shared level
    /// and ends the lease, and the holder restarted on its container reads that value without
    /// fetching.
    @Test func aWaiterTakesOverTheLeaseOfAKilledHolder() async throws {
        let server = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let namespace = "fleet-lease-kill-\(UUID().uuidString)"
        let holderArguments = [
            "fleet-lease-holder", folder.url.path, "holder", server.url, namespace, "5000", "600000", "key",
        ]
        let holder = try WorkerProcess(holderArguments)
        _ = await expectLine(holder, "ready")
        _ = await expectLine(holder, "fetching key")
        let level = try RedisCacheLevel(url: server.url, namespace: namespace, commandTimeout: .seconds(10))
        let fetches = Counter()
        let waiter = try folder.stringBuilder("waiter")
            .sharedLevel(level)
            .fleetSingleFetch(leaseDuration: .seconds(3_600), waitLimit: .seconds(3_600))
            .fetcher { key in
                _ = fetches.increment()
                return "fetched by the waiter \(key)"
            }
            .build()
        let leases = try #require(waiter.engine.shared?.leases)
        let waiting = Task { try await waiter.getOrFetch(forKey: "key") }
        // The waiter finds the lease held, and waits (on a loaded machine the lease may have expired
        // already: the waiter then takes it at once).
        #expect(await waitUntil(seconds: 600) { leases.watchedKeyCount == 1 || fetches.value == 1 })
        holder.kill()
        #expect(await onPlainThread { holder.wait() } == .killed(SIGKILL))
        #expect(try await waiting.value == "fetched by the waiter key")
        #expect(fetches.value == 1)
        await waiter.flush()
        // The waiter's write ended the lease: a later fetch takes it at once.
        #expect(try await level.takeLease(forKey: "key", token: "later", duration: .seconds(3_600)))
        try await level.releaseLease(forKey: "key", token: "later")
        // Restarted on its container, the holder reads the waiter's value: no fetch.
        let restarted = try WorkerProcess(holderArguments)
        _ = await expectLine(restarted, "ready")
        _ = await expectLine(restarted, "value fetched by the waiter key")
        #expect(await onPlainThread { restarted.wait() } == .exited(0))
        withExtendedLifetime(folder) {}
    }
}
