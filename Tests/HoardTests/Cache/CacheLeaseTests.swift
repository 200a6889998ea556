import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// `fleetSingleFetch` without a server: caches on one in-memory leasing level, as the instances of a
/// fleet on one Redis, under many concurrent callers, with cancelled waiters.
@Suite(.timeLimit(.minutes(10)))
struct CacheLeaseTests {
    /// An instance of the fleet: a memory-only cache on `level`.
    static func instance(
        _ level: FakeLeasingLevel,
        waitLimit: Duration = .seconds(3_600),
        fetcher: @escaping @Sendable (String) async throws -> String
    ) throws -> Cache<String> {
        try CacheBuilder<String>(serializer: StringSerializer())
            .maxDiskCount(0)
            .maxRamCount(1_000)
            .sharedLevel(level)
            .fleetSingleFetch(leaseDuration: .seconds(3_600), waitLimit: waitLimit)
            .fetcher(fetcher)
            .build()
    }

    /// An instance whose fetch of any key returns "origin <key>" once `origin` opens, with the
    /// number of fetches it started.
    static func holder(_ level: FakeLeasingLevel) throws -> (Cache<String>, origin: Gate, started: Counter) {
        let origin = Gate()
        let started = Counter()
        let holder = try instance(level) { key in
            started.increment()
            try await origin.wait()
            return "origin \(key)"
        }
        return (holder, origin, started)
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
        let (holder, origin, started) = try Self.holder(level)
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

    /// A waiter whose shared level stops answering mid-wait (a cluster in an election, a server
    /// that hangs) fetches by itself once its wait limit has passed, without waiting for the level;
    /// a lease it is granted after that is given back.
    @Test(arguments: [false, true])
    func aWaiterWhoseLevelStopsAnsweringFetchesByItselfAfterTheWaitLimit(leasesStall: Bool) async throws {
        let level = FakeLeasingLevel()
        let (holder, origin, started) = try Self.holder(level)
        let waiting = try Self.instance(level, waitLimit: .seconds(3)) { _ in "fetched by the waiter" }
        let held = Task { try await holder.getOrFetch(forKey: "k") }
        #expect(await waitUntil { started.value == 1 })
        // The level stops answering once the holder's and the waiter's first lease requests are
        // answered: the waiter's reads or its next lease request, which are part of its wait. (The
        // first request, like the read before it, is an ordinary call of the level, bounded by the
        // level's own timeout only.)
        let stall = Gate()
        level.stall.withLock { $0 = FakeLeasingLevel.Stall(gate: stall, reads: !leasesStall, afterLeaseRequests: 2) }
        let waiter = Task { try await waiting.getOrFetch(forKey: "k") }
        let finished = Protected<String?>(nil)
        Task {
            let value = (try? await waiter.value) ?? "failed"
            finished.withLock { $0 = value }
        }
        // Without a limit on the level's calls, the waiter would wait as long as the stall lasts.
        #expect(await waitUntil(seconds: 600) { finished.withLock { $0 } != nil })
        #expect(finished.withLock { $0 } == "fetched by the waiter")
        #expect(level.stalledCalls.value >= 1)
        level.stall.withLock { $0 = nil }
        // The holder stores and ends its lease; then the stalled calls are served. A lease request
        // among them is granted the lease, which nobody will store under: it is given back.
        origin.open()
        #expect(try await held.value == "origin k")
        await holder.flush()
        #expect(level.lease(forKey: "k") == nil)
        // The waiter's own value reached the level before the stalled calls are served, so that its
        // write cannot be what ends a lease granted late.
        await waiting.flush()
        let grantedBefore = level.leasesGranted(forKey: "k")
        stall.open()
        #expect(await waitUntil { level.stalledCallsServed.value == level.stalledCalls.value })
        if leasesStall { #expect(await waitUntil { level.leasesGranted(forKey: "k") > grantedBefore }) }
        #expect(await waitUntil { level.lease(forKey: "k") == nil })
        // A read the wait gave up on, served now, finds the value stored meanwhile, but is not
        // filled in: the waiter keeps what it fetched, and no fill is left open.
        #expect(await waitUntil { waiting.engine.stripes.fillsInFlight == 0 })
        #expect(waiting.value(forKey: "k") == "fetched by the waiter")
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
