import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// The wait of a shared read for the own changes of the key on their way there.
///
/// Against the paths around it: leases, coherence with the local copies bypassed, a clear followed
/// by a set, a write that fails, the blocking form, another cache on the container. Each gate is opened before the read is awaited, so that a run that fails
/// ends rather than hangs.
@Suite(.timeLimit(.minutes(10)))
struct SharedOwnChangeSeamTests {
    init() { TestLog.install() }

    /// Waits until the read of "k" has joined a fetch (waiting there) or reached the shared level.
    private func readIsUnderWay(_ cache: Cache<String>, gets: @escaping () -> Int) async -> Bool {
        await waitUntil { cache.flights.waiterCount(forKey: "k") == 1 || gets() > 0 }
    }

    @Test func aLeasedReadAfterAnOwnRemovalFetchesRatherThanReturnTheRemovedValue() async throws {
        let folder = TemporaryDirectory()
        let level = GatedLeasingLevel()
        let cache = try folder.stringBuilder().sharedLevel(level).fleetSingleFetch().fetcher { _ in "fetched" }
            .build()
        try await cache.save("old", forKey: "k")
        let gate = level.holdNextRemoval()
        cache.removeValue(forKey: "k")
        #expect(await waitUntil { level.heldRemovals == 1 })
        let read = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await readIsUnderWay(cache) { level.gets.value })
        #expect(level.gets.value == 0, "the read reached the shared level before this cache's removal was made")
        gate.open()
        #expect(try await read.value == "fetched")
        await cache.flush()
        #expect(level.inner.leasesGranted(forKey: "k") == 1, "the fetch after the removal took no lease")
        #expect(cache.memory?.peek("k")?.value == "fetched")
        withExtendedLifetime(folder) {}
    }

    @Test func aReadDuringATrackingLossWithLocalCopiesBypassedWaitsForAnOwnRemoval() async throws {
        let folder = TemporaryDirectory()
        let level = GatedInvalidatingLevel()
        let cache = try folder.stringBuilder().sharedLevel(level)
            .coherence(.invalidations(maxLocalAge: .seconds(86_400), duringOutage: .bypassLocalCopies))
            .fetcher { _ in "fetched" }.build()
        #expect(await waitUntil { !cache.isClearingDisk })
        level.base.announce(.tracking)
        #expect(await waitUntil { cache.isCoherent })
        try await cache.save("old", forKey: "k")
        level.base.announce(.all(reason: "test: tracking lost"))
        #expect(!cache.isCoherent)
        let gate = level.holdNextRemoval()
        cache.removeValue(forKey: "k")
        #expect(await waitUntil { level.heldChanges == 1 })
        let read = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await readIsUnderWay(cache) { level.base.getsStarted })
        gate.open()
        #expect(try await read.value == "fetched", "the read returned the value this cache's removal replaced")
        withExtendedLifetime(folder) {}
    }

    @Test func aReadAfterAnOwnClearAndASetOfTheKeyFindsTheSetsValue() async throws {
        let folder = TemporaryDirectory()
        let level = GatedInvalidatingLevel()
        let cache = try folder.stringBuilder().sharedLevel(level).fetcher { _ in "fetched" }.build()
        try await cache.save("old", forKey: "k")
        let gate = level.holdNextClear()
        cache.removeAll()
        #expect(await waitUntil { level.heldChanges == 1 })
        cache.set("new", forKey: "k")
        // The local copies go: only the shared level, once the clear and then the set are made, has
        // the value.
        cache.clearMemory()
        cache.clearDisk()
        #expect(cache.entry(forKey: "k") == nil)
        let read = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await readIsUnderWay(cache) { level.base.getsStarted })
        gate.open()
        #expect(try await read.value == "new", "the read did not wait for the set queued behind the clear")
        withExtendedLifetime(folder) {}
    }

    @Test func aReadWaitingForAnOwnRemovalThatFailsGoesOnToTheSharedLevel() async throws {
        let folder = TemporaryDirectory()
        let level = GatedInvalidatingLevel()
        let cache = try folder.stringBuilder().sharedLevel(level).fetcher { _ in "fetched" }.build()
        try await cache.save("old", forKey: "k")
        let gate = level.holdNextRemoval(failing: true)
        cache.removeValue(forKey: "k")
        #expect(await waitUntil { level.heldChanges == 1 })
        let read = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await readIsUnderWay(cache) { level.base.getsStarted })
        #expect(level.base.getsStarted == 0, "the read did not wait for the removal")
        gate.open()
        // The removal failed: the shared level still holds "old", which the read may find.
        #expect(["old", "fetched"].contains(try await read.value))
        #expect(level.base.getsStarted == 1, "the read did not go on to the shared level after the failure")
        #expect(cache.statistics.sharedErrors == 1)
        withExtendedLifetime(folder) {}
    }

    @Test func theBlockingFormWaitsForAnOwnRemovalHeldOnItsWay() async throws {
        let folder = TemporaryDirectory()
        let level = GatedInvalidatingLevel()
        let cache = try folder.stringBuilder().sharedLevel(level).fetcher { _ in "fetched" }.build()
        try await cache.save("old", forKey: "k")
        let gate = level.holdNextRemoval()
        cache.removeValue(forKey: "k")
        #expect(await waitUntil { level.heldChanges == 1 })
        let read = Task { await onPlainThread { try? cache.getOrFetchAndWait(forKey: "k") } }
        #expect(await readIsUnderWay(cache) { level.base.getsStarted })
        gate.open()
        #expect(await read.value == "fetched", "the blocking read returned the value this cache removed")
        withExtendedLifetime(folder) {}
    }
}

/// A ``FakeLeasingLevel`` whose next removal can be held at a gate before it is made.
private final class GatedLeasingLevel: LeasingCacheLevel, Sendable {
    let inner = FakeLeasingLevel()
    private let state = Protected((removal: Gate?.none, held: 0))
    /// How many reads reached the level.
    let gets = Counter()

    func holdNextRemoval() -> Gate {
        let gate = Gate()
        state.withLock { $0.removal = gate }
        return gate
    }

    var heldRemovals: Int { state.withLock { $0.held } }

    private func waitIfHeld() async throws {
        let gate = state.withLock { state -> Gate? in
            defer { state.removal = nil }
            if state.removal != nil { state.held += 1 }
            return state.removal
        }
        try await gate?.wait()
    }

    func get(_ key: String) async throws -> Data {
        gets.increment()
        return try await inner.get(key)
    }

    func set(_ value: Data, forKey key: String) async throws { try await inner.set(value, forKey: key) }

    func removeValue(forKey key: String) async throws {
        try await waitIfHeld()
        try await inner.removeValue(forKey: key)
    }

    func clear() async { await inner.clear() }
    func onMemoryWarning() {}

    func takeLease(forKey key: String, token: String, duration: Duration) async throws -> Bool {
        try await inner.takeLease(forKey: key, token: token, duration: duration)
    }

    func set(_ value: Data, forKey key: String, expiresAt: Date?, ifLeasedTo token: String) async throws -> Bool {
        try await inner.set(value, forKey: key, expiresAt: expiresAt, ifLeasedTo: token)
    }

    func releaseLease(forKey key: String, token: String) async throws {
        try await inner.releaseLease(forKey: key, token: token)
    }

    func setEndingLease(_ value: Data, forKey key: String, expiresAt: Date?) async throws {
        try await inner.setEndingLease(value, forKey: key, expiresAt: expiresAt)
    }

    func removeValueEndingLease(forKey key: String) async throws {
        try await waitIfHeld()
        try await inner.removeValueEndingLease(forKey: key)
    }
}

extension SharedOwnChangeSeamTests {
    /// Two caches of one process on one container and one shared level: a removal by one is a change
    /// the other sees on disk at once, and on the shared level only once it is made.
    @Test func aRemovalByAnotherCacheOnTheContainerIsNotUndoneByAReadOfTheSharedLevel() async throws {
        let folder = TemporaryDirectory()
        let level = GatedInvalidatingLevel()
        let first = try folder.stringBuilder("c").sharedLevel(level).fetcher { _ in "fetched" }.build()
        let second = try folder.stringBuilder("c").sharedLevel(level).fetcher { _ in "fetched" }.build()
        try await first.save("old", forKey: "k")
        let gate = level.holdNextRemoval()
        first.removeValue(forKey: "k")
        #expect(await waitUntil { level.heldChanges == 1 })
        let read = Task { try await second.getOrFetch(forKey: "k") }
        #expect(await waitUntil { second.flights.waiterCount(forKey: "k") == 1 || level.base.getsStarted > 0 })
        gate.open()
        let secondSaw = try await read.value
        await first.flush()
        await second.flush()
        let firstSaw = try await first.getOrFetch(forKey: "k")
        #expect(firstSaw == "fetched", "the cache that removed the key found the removed value again")
        #expect(secondSaw == "fetched", "the other cache on the container returned the removed value")
        withExtendedLifetime(folder) {}
    }
}
