import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// A leasing level in memory (``FakeLeasingLevel``) whose calls behave as `RedisCacheLevel`'s do
/// when their reply is in flight: the server has acted on the command, and a caller cancelled
/// meanwhile stops waiting for the reply (`RedisPool.send` finishes the request with
/// `CancellationError`); and whose writes that end a lease can be held before they land.
final class SeamLeasingLevel: LeasingCacheLevel, Sendable {
    let inner = FakeLeasingLevel()
    private let state = Protected(
        (leaseReply: Gate?.none, leaseRepliesHeld: 0, endingSet: Gate?.none, endingSetsHeld: 0, release: Gate?.none)
    )
    /// Awaited once a lease request is granted, before its reply: what happens on the server right
    /// after it granted the lease.
    let afterGrant = Protected<(@Sendable () async -> Void)?>(nil)
    /// Awaited before each lease request reaches the server, with its number (1 for the first): what
    /// happens on the server just before.
    let beforeLeaseRequest = Protected<(@Sendable (Int) async -> Void)?>(nil)
    private let leaseRequests = Counter()
    /// How many lease releases reached the server.
    let releases = Counter()

    /// Holds the reply of the next lease request (the server grants or refuses it at once).
    func holdNextLeaseReply() -> Gate {
        let gate = Gate()
        state.withLock { $0.leaseReply = gate }
        return gate
    }

    /// Holds the next write that ends the lease (a `set` or `save` of another instance) before it
    /// reaches the server.
    func holdNextEndingSet() -> Gate {
        let gate = Gate()
        state.withLock { $0.endingSet = gate }
        return gate
    }

    /// Holds every lease release before it reaches the server, until `gate` opens.
    func holdReleases(until gate: Gate) {
        state.withLock { $0.release = gate }
    }

    var leaseRepliesHeld: Int { state.withLock { $0.leaseRepliesHeld } }
    var endingSetsHeld: Int { state.withLock { $0.endingSetsHeld } }

    func get(_ key: String) async throws -> Data { try await inner.get(key) }
    func set(_ value: Data, forKey key: String) async throws { try await inner.set(value, forKey: key) }
    func removeValue(forKey key: String) async throws { try await inner.removeValue(forKey: key) }
    func clear() async { await inner.clear() }
    func onMemoryWarning() {}

    func takeLease(forKey key: String, token: String, duration: Duration) async throws -> Bool {
        let gate = state.withLock { state -> Gate? in
            defer { state.leaseReply = nil }
            if state.leaseReply != nil { state.leaseRepliesHeld += 1 }
            return state.leaseReply
        }
        leaseRequests.increment()
        if let before = beforeLeaseRequest.withLock({ $0 }) { await before(leaseRequests.value) }
        // The server has run `SET NX`; only its reply is on its way.
        let granted = try await inner.takeLease(forKey: key, token: token, duration: duration)
        if granted, let afterGrant = afterGrant.withLock({ $0 }) { await afterGrant() }
        // A caller cancelled meanwhile gets `CancellationError`, as from `RedisPool.send`.
        try await gate?.wait()
        return granted
    }

    func set(_ value: Data, forKey key: String, expiresAt: Date?, ifLeasedTo token: String) async throws -> Bool {
        try await inner.set(value, forKey: key, expiresAt: expiresAt, ifLeasedTo: token)
    }

    func releaseLease(forKey key: String, token: String) async throws {
        // `RedisPool.send` checks for cancellation before it sends anything.
        try Task.checkCancellation()
        try await state.withLock { $0.release }?.wait()
        try await inner.releaseLease(forKey: key, token: token)
        releases.increment()
    }

    func setEndingLease(_ value: Data, forKey key: String, expiresAt: Date?) async throws {
        let gate = state.withLock { state -> Gate? in
            defer { state.endingSet = nil }
            if state.endingSet != nil { state.endingSetsHeld += 1 }
            return state.endingSet
        }
        try await gate?.wait()
        try await inner.setEndingLease(value, forKey: key, expiresAt: expiresAt)
    }

    func removeValueEndingLease(forKey key: String) async throws {
        try await inner.removeValueEndingLease(forKey: key)
    }
}

/// Seams of the lease wait (`fleetSingleFetch`) with cancellation and with the disk level.
@Suite(.timeLimit(.minutes(10)))
struct CacheLeaseSeamTests {
    static func instance(
        _ folder: TemporaryDirectory,
        _ container: String,
        _ level: SeamLeasingLevel,
        waitLimit: Duration = .seconds(3_600),
        fetcher: @escaping @Sendable (String) async throws -> String
    ) throws -> Cache<String> {
        try folder.stringBuilder(container)
            .maxRamCount(100)
            .sharedLevel(level)
            .fleetSingleFetch(leaseDuration: .seconds(3_600), waitLimit: waitLimit)
            .fetcher(fetcher)
            .build()
    }

    /// A caller cancelled while the reply to its first lease request is in flight leaves no lease.
    ///
    /// The server granted the lease; the caller stops waiting for the reply and never fetches. The
    /// lease it was granted must be given back, or every other instance that misses the key waits
    /// its whole wait limit for a fetch nobody makes (on Redis, until the lease's duration ends).
    @Test func aCallerCancelledDuringItsLeaseRequestLeavesNoLeaseBehind() async throws {
        let folder = TemporaryDirectory()
        let level = SeamLeasingLevel()
        let cancelled = try Self.instance(folder, "a", level) { _ in "fetched by the cancelled caller" }
        let reply = level.holdNextLeaseReply()
        let call = Task { try await cancelled.getOrFetch(forKey: "k") }
        #expect(await waitUntil { level.leaseRepliesHeld == 1 })
        // The server granted it; the reply has not come.
        #expect(level.inner.lease(forKey: "k") != nil)
        call.cancel()
        await #expect(throws: CancellationError.self) { try await call.value }
        reply.open()
        // No fetch of this caller will ever store under that lease: it must go.
        #expect(await waitUntil { level.inner.lease(forKey: "k") == nil })
        // Another instance that misses the key fetches at once, not after its wait limit (an hour).
        let fetched = Counter()
        let other = try Self.instance(folder, "b", level) { _ in
            fetched.increment()
            return "fetched by the other"
        }
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

    /// A waiter's fill does not replace a value another cache on its container saved meanwhile.
    ///
    /// A waiter's read fills its shared-level value into the disk its cache shares with another
    /// cache on the container. The other cache saved a newer value there while the wait went on:
    /// the fill must not replace it.
    ///
    /// `X` waits on the lease held by `H`. `Y`, on `X`'s container, saves "saved by Y": on the disk
    /// at once; its shared write is held. `H` stores its value under its lease (the lease still
    /// holds). `X`'s next read finds `H`'s value, takes its fill token then (after `Y`'s save), and
    /// fills it into the disk over "saved by Y". Then `Y`'s shared write lands and its save returns:
    /// the shared level holds "saved by Y", and the container the older value.
    @Test func aWaitersFillDoesNotReplaceAValueAnotherCacheOnTheContainerSavedDuringTheWait() async throws {
        let folder = TemporaryDirectory()
        let level = SeamLeasingLevel()
        let origin = Gate()
        let started = Counter()
        let holder = try Self.instance(folder, "h", level) { key in
            started.increment()
            try await origin.wait()
            return "origin \(key)"
        }
        let waiter = try Self.instance(folder, "c", level) { _ in "fetched by the waiter" }
        let saver = try Self.instance(folder, "c", level) { _ in "fetched by the saver" }
        let held = Task { try await holder.getOrFetch(forKey: "k") }
        #expect(await waitUntil { started.value == 1 })
        let waiting = Task { try await waiter.getOrFetch(forKey: "k") }
        #expect(await waitUntil { (waiter.engine.shared?.leases?.watchedKeyCount ?? 0) == 1 })
        // The saver's shared write is held; its value is on the container's disk at once.
        let sharedWrite = level.holdNextEndingSet()
        let saved = Task { try await saver.save("saved by Y", forKey: "k") }
        #expect(await waitUntil { level.endingSetsHeld == 1 })
        #expect(saver.value(forKey: "k") == "saved by Y")
        // The holder stores under its lease, which still holds; the waiter's next read finds it.
        origin.open()
        #expect(try await held.value == "origin k")
        // The waiter's callers may get either (both were written after their call began).
        let got = try await waiting.value
        #expect(got == "origin k" || got == "saved by Y")
        // The saver's shared write lands: its save returns.
        sharedWrite.open()
        try await saved.value
        await waiter.flush()
        await saver.flush()
        // The shared level holds what Y saved last.
        let shared = try EntryFormat.decode([UInt8](try await level.inner.get("k")))
        #expect(String(decoding: shared.payload, as: UTF8.self) == "saved by Y")
        // So must the container: Y reads its own save back, and so does a new process.
        #expect(saver.value(forKey: "k") == "saved by Y")
        let reopened = try folder.stringBuilder("c").maxRamCount(0).build(sharingStore: false)
        #expect(reopened.value(forKey: "k") == "saved by Y")
    }

    /// A waiter that takes the lease and then finds the value does not wait for a stalled release.
    ///
    /// The waiter takes the lease while waiting, and its confirming read finds the value the holder
    /// stored meanwhile: it serves that value, and waits for the release of its lease no longer than
    /// for the wait's other calls, however long the level takes to answer. The release is still sent.
    @Test func aWaiterThatTakesTheLeaseAndFindsTheValueDoesNotWaitForAStalledRelease() async throws {
        let folder = TemporaryDirectory()
        let level = SeamLeasingLevel()
        // Another instance holds the lease.
        #expect(try await level.inner.takeLease(forKey: "k", token: "holder", duration: .seconds(3_600)))
        let holder = try Self.instance(folder, "h", level) { _ in "fetched by the holder" }
        let waiter = try Self.instance(folder, "w", level, waitLimit: .seconds(10)) { _ in "fetched by the waiter" }
        // Once the waiter's first request was refused and it asks again, the holder's lease ends,
        // the holder's value lands right after the waiter's request is granted, and the level stops
        // answering releases. Armed by the level itself, between the two requests: no timing.
        let releases = Gate()
        level.beforeLeaseRequest.withLock {
            $0 = { number in
                guard number == 2 else { return }
                level.holdReleases(until: releases)
                level.afterGrant.withLock { $0 = { try? await holder.save("stored by the holder", forKey: "k") } }
                try? await level.inner.releaseLease(forKey: "k", token: "holder")
            }
        }
        let waiting = Task { try await waiter.getOrFetch(forKey: "k") }
        let finished = Protected<String?>(nil)
        Task {
            let value = (try? await waiting.value) ?? "failed"
            finished.withLock { $0 = value }
        }
        #expect(await waitUntil { finished.withLock { $0 } != nil })
        #expect(finished.withLock { $0 } == "stored by the holder")
        #expect(level.releases.value == 0)
        releases.open()
        #expect(await waitUntil { level.releases.value == 1 })
    }

    /// A waiter's expired copy in memory does not hide the value another process saved on disk.
    ///
    /// The waiter keeps an expired copy in memory (`serveStaleOnFetchFailure`). Another process on
    /// its container (a store of its own) saves a newer value during the wait, its shared write held
    /// while the holder's value lands under the lease. The waiter's next read must find the saved
    /// file, not take the expired memory copy for the local answer and fill the holder's older value
    /// over that file.
    @Test func aWaitersExpiredMemoryCopyDoesNotHideAValueAnotherProcessSavedOnDisk() async throws {
        let folder = TemporaryDirectory()
        let level = SeamLeasingLevel()
        let clock = ManualClock()
        let origin = Gate()
        let started = Counter()
        let holder = try Self.instance(folder, "h", level) { key in
            started.increment()
            try await origin.wait()
            return "origin \(key)"
        }
        let waiter = try folder.stringBuilder("c").maxRamCount(100).clock(clock.read).expiry(.seconds(60))
            .serveStaleOnFetchFailure(true)
            .sharedLevel(level)
            .fleetSingleFetch(leaseDuration: .seconds(3_600), waitLimit: .seconds(3_600))
            .fetcher { _ in "fetched by the waiter" }
            .build()
        // An old value, expired now in the waiter's memory (kept there for stale serving) and disk.
        waiter["k"] = "old"
        await waiter.flush()
        clock.advance(by: 61)
        let held = Task { try await holder.getOrFetch(forKey: "k") }
        #expect(await waitUntil { started.value == 1 })
        let waiting = Task { try await waiter.getOrFetch(forKey: "k") }
        #expect(await waitUntil { (waiter.engine.shared?.leases?.watchedKeyCount ?? 0) == 1 })
        // Another process saves: on the container's disk at once; its shared write is held.
        let saver = try folder.stringBuilder("c").maxRamCount(0).sharedLevel(level)
            .fleetSingleFetch(leaseDuration: .seconds(3_600), waitLimit: .seconds(3_600))
            .build(sharingStore: false)
        let sharedWrite = level.holdNextEndingSet()
        let saved = Task { try await saver.save("saved by the other process", forKey: "k") }
        #expect(await waitUntil { level.endingSetsHeld == 1 })
        // Its file has landed: its store's writer may still have had it when the shared write came.
        await saver.engine.disk?.flush()
        // The holder stores under its lease, which still holds; the waiter's next read looks.
        origin.open()
        #expect(try await held.value == "origin k")
        _ = try await waiting.value
        sharedWrite.open()
        try await saved.value
        await waiter.flush()
        await saver.flush()
        let reopened = try folder.stringBuilder("c").maxRamCount(0).build(sharingStore: false)
        #expect(reopened.value(forKey: "k") == "saved by the other process")
    }
}
