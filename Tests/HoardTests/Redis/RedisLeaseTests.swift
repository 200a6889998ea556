import Foundation
import HoardTestSupport
import Testing

@testable import Hoard
@testable import HoardRedis

/// `fleetSingleFetch` over a real server: instances of a fleet (each cache on its own level, so its
/// own connections, as separate processes have) that miss one key call the origin once between
/// them.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason), .timeLimit(.minutes(10)))
struct RedisLeaseTests {
    init() { TestLog.install() }

    /// One instance of a fleet: a cache on a level of its own at `url`, with leases.
    static func instance(
        _ folder: TemporaryDirectory,
        _ container: String,
        url: String,
        namespace: String,
        coherent: Bool = false,
        // Ten minutes, not one: a test whose holder waits on a gate must not see its lease expire,
        // nor a waiter give up, while a loaded run (ThreadSanitizer on two cores) stalls it.
        leaseDuration: Duration = .seconds(600),
        waitLimit: Duration = .seconds(600),
        pausesOnlyEnd: Bool = false,
        commandTimeout: Duration = .seconds(10),
        expiry: CacheExpiry = .never,
        fetcher: @escaping @Sendable (String) async throws -> String
    ) throws -> Cache<String> {
        var configuration = try RedisCacheLevel.Configuration(url: url)
        configuration.poolSize = 2
        configuration.connectTimeout = .seconds(10)
        configuration.commandTimeout = commandTimeout
        // No test here stops the server's pings: a loaded run (ThreadSanitizer on two cores) must not
        // count the tracking connection lost, which drops the local copies the tests look at.
        configuration.trackingPingTimeout = .seconds(600)
        let level = try RedisCacheLevel(configuration, namespace: namespace)
        var builder = folder.stringBuilder(container).sharedLevel(level).expiry(expiry)
            .fleetSingleFetch(leaseDuration: leaseDuration, waitLimit: waitLimit)
            .fetcher(fetcher)
        if coherent { builder = builder.coherence(.invalidations(maxLocalAge: .seconds(86_400))) }
        if pausesOnlyEnd {
            // A waiter reads again only when an invalidation wakes it (or after an hour).
            builder.singleFetch?.pauses = (.seconds(3_600), .seconds(3_600))
        }
        return try builder.build()
    }

    /// Whether `cache` has a caller waiting for another instance's fetch.
    static func isWaiting(_ cache: Cache<String>) -> Bool {
        (cache.engine.shared?.leases?.watchedKeyCount ?? 0) > 0
    }

    /// Starts `count` calls of `getOrFetch(forKey: key)` on `cache`.
    static func callers(_ count: Int, _ cache: Cache<String>, _ key: String) -> [Task<String, any Error>] {
        (0..<count).map { _ in Task { try await cache.getOrFetch(forKey: key) } }
    }

    @Test func instancesThatMissOneKeyCallTheOriginOnceAndPoolTheirOwnCallers() async throws {
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
        let first = try Self.instance(folder, "a", url: server.url, namespace: namespace, fetcher: fetcher)
        let second = try Self.instance(folder, "b", url: server.url, namespace: namespace, fetcher: fetcher)
        let holders = Self.callers(32, first, "user 1")
        #expect(await waitUntil { fetches.value == 1 })
        let waiters = Self.callers(32, second, "user 1")
        #expect(await waitUntil { Self.isWaiting(second) })
        origin.open()
        for caller in holders + waiters { #expect(try await caller.value == "fetched user 1") }
        #expect(fetches.value == 1)
        #expect(first.statistics.fetches == 1)
        #expect(second.statistics.fetches == 0)
        #expect(second.statistics.sharedHits == 1)
        // The holder's set ended its lease.
        let level = try RedisCacheLevel.patient(url: server.url, namespace: namespace)
        #expect(try await Self.exists(level.leaseKey("user 1"), on: level) == false)
        #expect(Self.isWaiting(second) == false)
    }

    @Test func aFailedFetchReleasesItsLeaseAndAWaiterFetches() async throws {
        let server = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let namespace = "lease-\(UUID().uuidString)"
        let origin = Gate()
        let failed = Counter()
        let first = try Self.instance(folder, "a", url: server.url, namespace: namespace) { _ in
            failed.increment()
            try await origin.wait()
            throw TestFailure("the origin is down for the first instance")
        }
        let fetched = Counter()
        let second = try Self.instance(folder, "b", url: server.url, namespace: namespace) { key in
            fetched.increment()
            return "fetched \(key)"
        }
        let holder = Task { try await first.getOrFetch(forKey: "k") }
        #expect(await waitUntil { failed.value == 1 })
        let waiter = Task { try await second.getOrFetch(forKey: "k") }
        #expect(await waitUntil { Self.isWaiting(second) })
        #expect(fetched.value == 0)
        origin.open()
        await #expect(throws: CacheError.self) { try await holder.value }
        // Released, the lease is the waiter's to take: it fetches (before its wait limit, an hour).
        #expect(try await waiter.value == "fetched k")
        #expect(fetched.value == 1)
        #expect(failed.value == 1)
    }

    @Test func aSlowHoldersValueIsRefusedOnceAnotherInstanceWroteTheKey() async throws {
        let server = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let namespace = "lease-\(UUID().uuidString)"
        let origin = Gate()
        let started = Counter()
        let slow = try Self.instance(folder, "a", url: server.url, namespace: namespace) { _ in
            started.increment()
            try await origin.wait()
            return "old, fetched before the write"
        }
        let writer = try Self.instance(folder, "b", url: server.url, namespace: namespace) { _ in "unused" }
        let holder = Task { try await slow.getOrFetch(forKey: "k") }
        #expect(await waitUntil { started.value == 1 })
        try await writer.save("new", forKey: "k")
        origin.open()
        // The holder's callers get what it fetched; the server keeps the newer value.
        #expect(try await holder.value == "old, fetched before the write")
        await slow.flush()
        let fetches = Counter()
        let reader = try Self.instance(folder, "c", url: server.url, namespace: namespace) { _ in
            fetches.increment()
            return "fetched"
        }
        #expect(try await reader.getOrFetch(forKey: "k") == "new")
        #expect(fetches.value == 0)
        #expect(slow.statistics.sharedErrors == 0)
    }

    @Test func canonicallyEquivalentKeysShareOneLease() async throws {
        let server = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let namespace = "lease-\(UUID().uuidString)"
        let fetches = Counter()
        let origin = Gate()
        let fetcher: @Sendable (String) async throws -> String = { key in
            fetches.increment()
            try await origin.wait()
            return "fetched"
        }
        let composed = "caf\u{E9}"
        let decomposed = "cafe\u{301}"
        #expect(composed == decomposed)
        #expect(Array(composed.utf8) != Array(decomposed.utf8))
        let first = try Self.instance(folder, "a", url: server.url, namespace: namespace, fetcher: fetcher)
        let second = try Self.instance(folder, "b", url: server.url, namespace: namespace, fetcher: fetcher)
        let holder = Task { try await first.getOrFetch(forKey: decomposed) }
        #expect(await waitUntil(seconds: 600) { fetches.value == 1 })
        // The lease is named by the key's NFC bytes, whichever spelling took it.
        let level = try RedisCacheLevel.patient(url: server.url, namespace: namespace)
        #expect(level.leaseKey(decomposed) == level.leaseKey(composed))
        #expect(try await Self.exists(level.leaseKey(composed), on: level))
        let waiter = Task { try await second.getOrFetch(forKey: composed) }
        #expect(await waitUntil(seconds: 600) { Self.isWaiting(second) })
        origin.open()
        #expect(try await holder.value == "fetched")
        #expect(try await waiter.value == "fetched")
        #expect(fetches.value == 1)
    }

    /// Whether the server has a key named `name` (`EXISTS`).
    static func exists(_ name: [UInt8], on level: RedisCacheLevel) async throws -> Bool {
        var command = RESPCommand("EXISTS", arguments: 1, isIdempotent: true)
        command.append(name)
        guard case .integer(let count) = try await level.send(command) else { throw TestFailure("EXISTS") }
        return count == 1
    }
}
