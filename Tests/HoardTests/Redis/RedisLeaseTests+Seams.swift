import Foundation
import HoardTestSupport
import Testing

@testable import Hoard
@testable import HoardRedis

/// Where leases meet the rest: coherence (invalidations wake the waiters; leases are never
/// announced), expiry, and a server that goes away.
extension RedisLeaseTests {
    @Test func anInvalidationWakesAWaiterAndLeasesNeverReachTheTrackingStream() async throws {
        let server = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let namespace = "lease-\(UUID().uuidString)"
        let fetches = Counter()
        let origin = Gate()
        let fetcher: @Sendable (String) async throws -> String = { key in
            fetches.increment()
            try await origin.wait()
            return "fetched \(key)"
        }
        // The waiters' pauses last an hour: only the invalidation of the holder's write can end them.
        func instance(_ container: String) throws -> Cache<String> {
            try Self.instance(
                folder,
                container,
                url: server.url,
                namespace: namespace,
                coherent: true,
                pausesOnlyEnd: true,
                fetcher: fetcher
            )
        }
        let first = try instance("a")
        let second = try instance("b")
        #expect(await waitUntil { first.isCoherent && second.isCoherent })
        let holder = Task { try await first.getOrFetch(forKey: "k") }
        #expect(await waitUntil { fetches.value == 1 })
        let waiters = Self.callers(8, second, "k")
        #expect(await waitUntil { Self.isWaiting(second) })
        origin.open()
        #expect(try await holder.value == "fetched k")
        for waiter in waiters { #expect(try await waiter.value == "fetched k") }
        #expect(fetches.value == 1)
        // The waiter kept its copy: the invalidation that woke it came before its read.
        #expect(second.value(forKey: "k") == "fetched k")
        // One change announced (the holder's value); taking and ending the lease were not.
        #expect(second.statistics.invalidations == 1)
        #expect(first.value(forKey: "k") == "fetched k")
    }

    @Test func theTrackingStreamDropsLeaseKeys() async throws {
        let server = try RedisTestServer.required()
        let namespace = "lease-\(UUID().uuidString)"
        let level = try RedisCacheLevel.patient(url: server.url, namespace: namespace)
        let events = Protected<[CacheInvalidation]>([])
        let subscription = try level.subscribeToInvalidations { event in events.withLock { $0.append(event) } }
        defer { subscription.cancel() }
        #expect(await waitUntil { events.withLock { $0.contains(.tracking) } })
        #expect(try await level.takeLease(forKey: "k", token: "one", duration: .seconds(3_600)))
        #expect(try await level.takeLease(forKey: "k", token: "two", duration: .seconds(3_600)) == false)
        try await level.releaseLease(forKey: "k", token: "one")
        #expect(try await level.takeLease(forKey: "k", token: "two", duration: .seconds(3_600)))
        #expect(try await level.set(Data("v".utf8), forKey: "k", expiresAt: nil, ifLeasedTo: "two"))
        try await level.setEndingLease(Data("w".utf8), forKey: "last", expiresAt: nil)
        #expect(await waitUntil { events.withLock { $0.contains(.keys(["last"])) } })
        let announced = events.withLock { $0 }.flatMap { event -> [String] in
            if case .keys(let keys) = event { return keys }
            return []
        }
        // The server announces each write in order: the leases' before the values', and none passed.
        #expect(announced == ["k", "last"])
    }

    @Test func aLeaseWhoseHolderDiedEndsByItselfAndAWaiterFetches() async throws {
        let server = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let namespace = "lease-\(UUID().uuidString)"
        let level = try RedisCacheLevel.patient(url: server.url, namespace: namespace)
        // A holder that took the lease for 300 ms and died.
        #expect(try await level.takeLease(forKey: "k", token: "dead holder", duration: .milliseconds(300)))
        let fetches = Counter()
        let cache = try Self.instance(folder, "a", url: server.url, namespace: namespace, waitLimit: .seconds(3_600)) {
            key in
            fetches.increment()
            return "fetched \(key)"
        }
        // Its wait limit is an hour: the lease's own expiry lets it take the lease and fetch.
        #expect(try await cache.getOrFetch(forKey: "k") == "fetched k")
        #expect(fetches.value == 1)
    }

    @Test func aValueStoredUnderALeaseKeepsItsExpiryAndEndsTheLease() async throws {
        let server = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let namespace = "lease-\(UUID().uuidString)"
        let fetches = Counter()
        // An hour: the value must still be there when a loaded run gets to look at it.
        let cache = try Self.instance(folder, "a", url: server.url, namespace: namespace, expiry: .seconds(3_600)) {
            key in
            fetches.increment()
            return "fetched \(key)"
        }
        #expect(try await cache.getOrFetch(forKey: "k") == "fetched k")
        await cache.flush()
        let level = try RedisCacheLevel.patient(url: server.url, namespace: namespace)
        let left = try #require(try await level.timeToLive(forKey: "k"))
        #expect(left > .zero && left <= .seconds(3_600))
        #expect(try await Self.exists(level.leaseKey("k"), on: level) == false)

        // A value set (not fetched) keeps its expiry too, and ends a lease another holds.
        #expect(try await level.takeLease(forKey: "j", token: "other", duration: .seconds(3_600)))
        cache.set("set", forKey: "j", expiry: .seconds(1_800))
        await cache.flush()
        let setLeft = try #require(try await level.timeToLive(forKey: "j"))
        #expect(setLeft > .zero && setLeft <= .seconds(1_800))
        #expect(try await Self.exists(level.leaseKey("j"), on: level) == false)
        #expect(try await level.set(Data("late".utf8), forKey: "j", expiresAt: nil, ifLeasedTo: "other") == false)
        #expect(fetches.value == 1)
    }

    @Test func aServerThatIsDownIsAMissAndAWaiterWhoseServerDiesFetches() async throws {
        _ = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        // Down from the start: the read fails, no lease is asked for, the fetcher serves.
        let closed = try LocalHTTPServer.closedPort()
        let fetches = Counter()
        let alone = try Self.instance(
            folder,
            "alone",
            url: "redis://127.0.0.1:\(closed)",
            namespace: "down",
            commandTimeout: .milliseconds(200)
        ) { key in
            fetches.increment()
            return "fetched \(key)"
        }
        #expect(try await alone.getOrFetch(forKey: "k") == "fetched k")
        #expect(fetches.value == 1)

        // Down while a waiter waits for a holder: the waiter fetches by itself.
        let server = try RedisTestServer.start()
        let namespace = "lease-\(UUID().uuidString)"
        let origin = Gate()
        let holderFetches = Counter()
        let first = try Self.instance(folder, "a", url: server.url, namespace: namespace) { _ in
            holderFetches.increment()
            try await origin.wait()
            return "fetched by the holder"
        }
        let second = try Self.instance(folder, "b", url: server.url, namespace: namespace) { _ in
            "fetched by the waiter"
        }
        let holder = Task { try await first.getOrFetch(forKey: "k") }
        #expect(await waitUntil { holderFetches.value == 1 })
        let waiter = Task { try await second.getOrFetch(forKey: "k") }
        #expect(await waitUntil { Self.isWaiting(second) })
        server.kill()
        #expect(try await waiter.value == "fetched by the waiter")
        origin.open()
        #expect(try await holder.value == "fetched by the holder")
        #expect(holderFetches.value == 1)
    }
}
