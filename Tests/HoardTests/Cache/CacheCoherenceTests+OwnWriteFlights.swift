import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Request pooling against the cache's own writes: once the shared level has a write (a `save`
/// returned, or a `flush` after a `set` or a removal), a read that begins must not be handed what a
/// shared read sent before the write returns.
extension CacheCoherenceTests {
    /// Waits until the second read of "k" either joined the read in flight or sent a read of its own.
    private func secondReadIsUnderWay(_ cache: Cache<String>, _ level: FakeInvalidatingLevel) async -> Bool {
        await waitUntil(seconds: 600) { cache.flights.waiterCount(forKey: "k") == 2 || level.getsStarted == 2 }
    }

    @Test func aReadBegunAfterAnOwnSaveWhileLocalCopiesAreBypassedDoesNotJoinAnOlderRead() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try await coherentCache(folder, level, duringOutage: .bypassLocalCopies)
        level.announce(.all(reason: "test: tracking lost"))
        #expect(!cache.isCoherent)
        level.store.plant(envelope("k", "old"), forKey: "k")
        let held = level.holdNextGet()
        let first = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil(seconds: 600) { level.getsStarted == 1 })
        // Confirmed: the shared level, where every read goes during the outage, holds the new value.
        try await cache.save("new", forKey: "k")
        #expect(try await level.store.get("k") == envelope("k", "new"))
        let second = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await secondReadIsUnderWay(cache, level))
        held.open()
        // The first read overlapped the save: either value is fine for it.
        #expect(["old", "new"].contains(try await first.value))
        // The second began once the save had returned.
        let secondSaw = try await second.value
        #expect(secondSaw == "new")
    }

    /// A read that begins while the save's write is on its way waits for it rather than read the
    /// older value there (during the outage, every read goes to the shared level).
    @Test func aReadBegunWhileAnOwnSaveIsOnItsWayWaitsForItAndReadsTheNewValue() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try await coherentCache(folder, level, duringOutage: .bypassLocalCopies)
        level.announce(.all(reason: "test: tracking lost"))
        level.store.plant(envelope("k", "old"), forKey: "k")
        let heldSet = level.holdNextSet()
        let save = Task { try await cache.save("new", forKey: "k") }
        #expect(await waitUntil(seconds: 600) { level.setsStarted == 1 })
        let first = Task { try await cache.getOrFetch(forKey: "k") }
        // Opened before the read is awaited, so that a run that fails ends rather than hangs.
        #expect(await waitUntil(seconds: 600) { cache.flights.waiterCount(forKey: "k") == 1 || level.getsStarted == 1 })
        heldSet.open()
        try await save.value
        #expect(try await first.value == "new")
        #expect(level.getsStarted == 1)
    }

    @Test func aReadBegunAfterAnOwnFlushedRemovalDoesNotJoinAnOlderRead() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try await coherentCache(folder, level) { _ in "fetched" }
        level.store.plant(envelope("k", "old"), forKey: "k")
        let held = level.holdNextGet()
        let first = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil(seconds: 600) { level.getsStarted == 1 })
        // The removal is made on the shared level; its announcement is still on its way.
        cache.removeValue(forKey: "k")
        await cache.flush()
        #expect(level.store.values["k"] == nil)
        let second = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await secondReadIsUnderWay(cache, level))
        held.open()
        #expect(["old", "fetched"].contains(try await first.value))
        // "Its next read is the new value or a miss, never the old one": the old value is gone from
        // every level before the second read began.
        let secondSaw = try await second.value
        #expect(secondSaw == "fetched")
    }

    @Test func withoutCoherenceAReadBegunAfterAFlushedRemovalDoesNotJoinAnOlderRead() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try folder.stringBuilder().sharedLevel(level).fetcher { _ in "fetched" }.build()
        level.store.plant(envelope("k", "old"), forKey: "k")
        let held = level.holdNextGet()
        let first = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil(seconds: 600) { level.getsStarted == 1 })
        cache.removeValue(forKey: "k")
        await cache.flush()
        #expect(level.store.values["k"] == nil)
        let second = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await secondReadIsUnderWay(cache, level))
        held.open()
        #expect(["old", "fetched"].contains(try await first.value))
        let secondSaw = try await second.value
        #expect(secondSaw == "fetched")
    }

    /// A `flush` returns only once the cache was told that the write it waits for was made, even when
    /// the thread that made it is held up before it tells (here: the cache is told through a handler
    /// that waits for the test, as a thread descheduled at that point would).
    @Test func aReadBegunAfterAFlushDoesNotJoinAReadSentBeforeTheWriteWhenTheCacheIsToldLate()
        async throws
    {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try await coherentCache(folder, level, duringOutage: .bypassLocalCopies)
        level.announce(.all(reason: "test: tracking lost"))
        level.store.plant(envelope("k", "old"), forKey: "k")
        let told = Counter()
        let goOn = DispatchSemaphore(value: 0)
        cache.engine.shared?.setLandedHandler { [weak cache] key in
            if told.increment() == 1 { goOn.wait() }
            cache?.retireReads(of: key)
        }
        // A read sent before the write: it reads the older value.
        let heldGet = level.holdNextGet()
        let first = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil(seconds: 600) { level.getsStarted == 1 })
        let heldSet = level.holdNextSet()
        cache.set("new", forKey: "k")
        #expect(await waitUntil(seconds: 600) { level.setsStarted == 1 })
        heldSet.open()
        #expect(await waitUntil(seconds: 600) { told.value == 1 })
        #expect(try await level.store.get("k") == envelope("k", "new"))
        let second = Task {
            await cache.flush()
            return try await cache.getOrFetch(forKey: "k")
        }
        // Either the flush waits for the cache to be told, or it returned and the read is under way.
        #expect(
            await waitUntil(seconds: 600) {
                cache.engine.shared?.waitingFlushCount == 1 || cache.flights.waiterCount(forKey: "k") == 2
                    || level.getsStarted == 2
            }
        )
        goOn.signal()
        heldGet.open()
        #expect(try await first.value == "old")
        // The second read began once the flush had returned.
        let secondSaw = try await second.value
        #expect(secondSaw == "new")
    }
}
