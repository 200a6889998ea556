import HoardTestSupport
import Testing

@testable import Hoard

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
