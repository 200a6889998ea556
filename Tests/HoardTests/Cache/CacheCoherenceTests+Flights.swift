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

/// `SharedFlights.retire(_:)`: the callers already waiting still get the retired flight's result or
/// their cancellation; later callers start a flight of their own.
@Suite struct RetiredFlightTests {
    @Test func aRetiredFlightServesItsWaitersAndLaterCallersStartAnother() async throws {
        let flights = SharedFlights<String, Int>()
        let firstGate = Gate()
        let runs = Protected(0)
        let run: @Sendable () async throws -> Int = {
            let number = runs.withLock { runs in
                runs += 1
                return runs
            }
            if number == 1 { try await firstGate.wait() }
            return number
        }
        let early = Task { try await flights.value(forKey: "k", operation: run) }
        let quitter = Task { try await flights.value(forKey: "k", operation: run) }
        #expect(await waitUntil { flights.waiterCount(forKey: "k") == 2 })
        flights.retire("k")
        #expect(flights.waiterCount(forKey: "k") == 0)
        // A waiter of the retired flight can still stop waiting.
        quitter.cancel()
        await #expect(throws: CancellationError.self) { try await quitter.value }
        let late = try await flights.value(forKey: "k", operation: run)
        #expect(late == 2)
        firstGate.open()
        #expect(try await early.value == 1)
        #expect(await waitUntil { flights.count == 0 })
    }

    @Test func cancellingEveryWaiterOfARetiredFlightCancelsIt() async throws {
        let flights = SharedFlights<String, Int>()
        let cancelled = Gate()
        let waiter = Task {
            try await flights.value(forKey: "k") {
                do {
                    try await Gate().wait()  // never opened: only cancellation ends it
                } catch {
                    cancelled.open()
                    throw error
                }
                return 0
            }
        }
        #expect(await waitUntil { flights.waiterCount(forKey: "k") == 1 })
        flights.retireAll()
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        try await cancelled.wait()
        #expect(flights.count == 0)
    }
}
