import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Request pooling against coherence: a read that begins once an announcement (or a loss of
/// tracking) was applied must not be handed what a shared read sent before it returns.
extension CacheCoherenceTests {
    /// Waits until `follower` either joined the read in flight or sent a read of its own.
    private func followerIsUnderWay(_ cache: Cache<String>, _ level: FakeInvalidatingLevel) async -> Bool {
        await waitUntil { cache.flights.waiterCount(forKey: "k") == 2 || level.getsStarted == 2 }
    }

    @Test func aReadBegunAfterAnInvalidationDoesNotJoinAFlightSentBeforeIt() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try await coherentCache(folder, level)
        level.store.plant(envelope("k", "old"), forKey: "k")
        let held = level.holdNextGet()
        let first = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { level.getsStarted == 1 })
        // Another instance's write is made and announced; this cache applies the announcement.
        level.store.plant(envelope("k", "new"), forKey: "k")
        level.announce(.keys(["k"]))
        #expect(cache.coherenceTally.droppedNotHeld == 1)
        // A read that begins only now, after the write and its announcement.
        let follower = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await followerIsUnderWay(cache, level))
        held.open()
        // The first read overlapped the write: either value is fine for it.
        #expect(["old", "new"].contains(try await first.value))
        // The follower began after it: "never the old one".
        let followerSaw = try await follower.value
        #expect(followerSaw == "new")
        #expect(cache["k"] != "old")
    }

    @Test func aReadBegunAfterALossOfTrackingDoesNotJoinAFlightSentBeforeIt() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try await coherentCache(folder, level, duringOutage: .bypassLocalCopies)
        level.store.plant(envelope("k", "old"), forKey: "k")
        let held = level.holdNextGet()
        let first = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { level.getsStarted == 1 })
        // The change comes with the loss: unannounced; the cache goes to the shared level for every read.
        level.store.plant(envelope("k", "new"), forKey: "k")
        level.announce(.all(reason: "test: tracking lost"))
        #expect(!cache.isCoherent)
        let follower = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await followerIsUnderWay(cache, level))
        held.open()
        #expect(["old", "new"].contains(try await first.value))
        // With bypassLocalCopies, no read is staler than the loss takes to detect.
        let followerSaw = try await follower.value
        #expect(followerSaw == "new")
    }
}
