import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// `fleetSingleFetch` without a server: caches on one in-memory leasing level, as the instances of a
/// fleet on one Redis, under many concurrent callers, with cancelled waiters.
@Suite(.timeLimit(.minutes(5)))
struct CacheLeaseTests {
    /// An instance of the fleet: a memory-only cache on `level`.
    static func instance(
        _ level: FakeLeasingLevel,
        fetcher: @escaping @Sendable (String) async throws -> String
    ) throws -> Cache<String> {
        try CacheBuilder<String>(serializer: StringSerializer())
            .maxDiskCount(0)
            .maxRamCount(1_000)
            .sharedLevel(level)
            .fleetSingleFetch(leaseDuration: .seconds(3_600), waitLimit: .seconds(3_600))
            .fetcher(fetcher)
            .build()
    }

    @Test func manyInstancesAndCallersFetchEachKeyOnce() async throws {
        let level = FakeLeasingLevel()
        let calls = Protected([String: Int]())
        let fetcher: @Sendable (String) async throws -> String = { key in
            calls.withLock { $0[key, default: 0] += 1 }
            // A slow origin: the others meet the lease.
            for _ in 0..<50 { await Task.yield() }
            return "origin \(key)"
        }
        let instances = try (0..<8).map { _ in try Self.instance(level, fetcher: fetcher) }
        let keys = (0..<(20 * StressScale.rounds)).map { "key-\($0)" }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for cache in instances {
                for _ in 0..<16 {
                    group.addTask {
                        for key in keys.shuffled() {
                            let value = try await cache.getOrFetch(forKey: key)
                            #expect(value == "origin \(key)")
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let counted = calls.withLock { $0 }
        for key in keys {
            #expect(counted[key] == 1, "origin calls for \(key)")
            // More than one lease may be granted: one taken just after the holder stored finds the
            // value when it reads the key again, and is released unused.
            #expect(level.leasesGranted(forKey: key) >= 1)
            #expect(level.lease(forKey: key) == nil)
        }
    }

    @Test func cancellingEveryWaiterEndsTheWaitAndTheHolderStillStores() async throws {
        let level = FakeLeasingLevel()
        let origin = Gate()
        let started = Counter()
        let holder = try Self.instance(level) { key in
            started.increment()
            try await origin.wait()
            return "origin \(key)"
        }
        let waiting = try Self.instance(level) { _ in "never" }
        let held = Task { try await holder.getOrFetch(forKey: "k") }
        #expect(await waitUntil { started.value == 1 })
        let waiters = (0..<8).map { _ in Task { try await waiting.getOrFetch(forKey: "k") } }
        #expect(await waitUntil { (waiting.engine.shared?.leases?.watchedKeyCount ?? 0) == 1 })
        for waiter in waiters { waiter.cancel() }
        for waiter in waiters {
            await #expect(throws: CancellationError.self) { try await waiter.value }
        }
        // The wait ended without the holder's value, and left no watch behind.
        #expect(await waitUntil { (waiting.engine.shared?.leases?.watchedKeyCount ?? 1) == 0 })
        origin.open()
        #expect(try await held.value == "origin k")
        await holder.flush()
        #expect(level.lease(forKey: "k") == nil)
        // The holder's value reached the level: the other instance reads it, and never fetches.
        #expect(try await waiting.getOrFetch(forKey: "k") == "origin k")
        #expect(waiting.statistics.fetches == 0)
    }

    @Test func aSetDuringTheHoldersOwnFetchWinsOnTheSharedLevel() async throws {
        let level = FakeLeasingLevel()
        let origin = Gate()
        let started = Counter()
        let holder = try Self.instance(level) { _ in
            started.increment()
            try await origin.wait()
            return "fetched before the set"
        }
        let fetched = Task { try await holder.getOrFetch(forKey: "k") }
        #expect(await waitUntil { started.value == 1 })
        holder.set("set meanwhile", forKey: "k")
        origin.open()
        #expect(try await fetched.value == "fetched before the set")
        await holder.flush()
        #expect(holder.value(forKey: "k") == "set meanwhile")
        let other = try Self.instance(level) { _ in "never" }
        #expect(try await other.getOrFetch(forKey: "k") == "set meanwhile")
        #expect(level.lease(forKey: "k") == nil)
    }
}
