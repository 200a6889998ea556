import Foundation
import HoardTestSupport
import Testing

@testable import Hoard
@testable import HoardRedis

/// `fleetSingleFetch` and `removeAll()` on a real server: the clear (`SCAN … MATCH`, `UNLINK`)
/// removes the namespace's leases with its values, so a fetch under a lease taken before it cannot
/// store its value after it.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason), .timeLimit(.minutes(10)))
struct RedisLeaseClearTests {
    init() { TestLog.install() }

    @Test func aClearRemovesTheLeaseAndTheHoldersWriteIsRefused() async throws {
        let server = try RedisTestServer.required()
        let level = try RedisCacheLevel.patient(url: server.url, namespace: "lease-\(UUID().uuidString)")
        #expect(try await level.takeLease(forKey: "k", token: "holder", duration: .seconds(600)))
        #expect(try await RedisLeaseTests.exists(level.leaseKey("k"), on: level))
        try await level.removeAll()
        #expect(try await RedisLeaseTests.exists(level.leaseKey("k"), on: level) == false)
        #expect(try await level.set(Data("old".utf8), forKey: "k", expiresAt: nil, ifLeasedTo: "holder") == false)
        #expect(try await RedisLeaseTests.exists(level.storedKey("k"), on: level) == false)
    }

    /// A holder whose fetch answers after another instance cleared the namespace leaves nothing on the
    /// server; the next miss fetches anew.
    @Test func aLeasedFetchAnsweringAfterAnotherInstancesClearIsNotShared() async throws {
        let server = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let namespace = "lease-\(UUID().uuidString)"
        let started = Counter()
        let gate = Gate()
        let holder = try RedisLeaseTests.instance(folder, "a", url: server.url, namespace: namespace) { _ in
            started.increment()
            try await gate.wait()
            return "fetched before the clear"
        }
        let peer = try RedisLeaseTests.instance(folder, "b", url: server.url, namespace: namespace) { _ in
            "fetched after the clear"
        }
        let level = try RedisCacheLevel.patient(url: server.url, namespace: namespace)
        let caller = Task { try await holder.getOrFetch(forKey: "k") }
        #expect(await waitUntil { started.value == 1 })
        #expect(try await RedisLeaseTests.exists(level.leaseKey("k"), on: level), "the fetch holds the lease")
        peer.removeAll()
        await peer.flush()
        #expect(try await RedisLeaseTests.exists(level.leaseKey("k"), on: level) == false, "the clear kept the lease")
        gate.open()
        #expect(try await caller.value == "fetched before the clear")
        await holder.flush()
        #expect(
            try await RedisLeaseTests.exists(level.storedKey("k"), on: level) == false,
            "the value fetched before the clear is on the server"
        )
        #expect(try await peer.getOrFetch(forKey: "k") == "fetched after the clear")
    }
}
