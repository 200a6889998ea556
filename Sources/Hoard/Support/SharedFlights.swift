/// In-flight work shared by every caller asking for the same key (request pooling, single-flight).
///
/// The first caller for a key starts the operation in an unstructured task; later callers for that
/// key wait for the same task. Its value or error reaches every waiter. A waiter whose task is
/// cancelled stops waiting at once (it gets `CancellationError`) without disturbing the others; when
/// the last waiter goes, the operation is cancelled. Nothing is kept after completion: this shares
/// work in flight, it does not cache.
///
/// Built as a state machine behind a lock: each method changes the table inside the lock and resumes
/// continuations or cancels tasks after unlocking.
final class SharedFlights<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private struct Flight {
        let key: Key
        let id: UInt64
        var task: Task<Void, any Error>?
        var waiters: [UInt64: CheckedContinuation<Value, any Error>]
    }

    private struct State {
        var flights: [Key: Flight] = [:]
        /// Flights that later callers may no longer join (see ``retire(_:)``), by id: they run on
        /// for the callers already waiting.
        var retired: [UInt64: Flight] = [:]
        /// The waiters of flights that have left the table and are being settled, by waiter ID: a
        /// waiter cancelled meanwhile still stops waiting at once.
        var settling: [UInt64: CheckedContinuation<Value, any Error>] = [:]
        var nextID: UInt64 = 0
        /// Operations started and not yet finished, abandoned ones included.
        var running = 0

        mutating func makeID() -> UInt64 {
            nextID &+= 1
            return nextID
        }
    }

    private let state = Locked(State())

    /// The number of keys with work in flight, and of retired flights still running.
    var count: Int { state.withLock { $0.flights.count + $0.retired.count } }

    /// Makes the flight of `key` under way, if any, one that later callers do not join.
    ///
    /// They start a new one; its callers so far still get its result.
    ///
    /// For a change that the flight's work may have missed (a coherent cache's announcement of the
    /// key): a caller that begins after it must not be handed what was read before it.
    func retire(_ key: Key) {
        state.withLock { state in
            guard let flight = state.flights.removeValue(forKey: key) else { return }
            state.retired[flight.id] = flight
        }
    }

    /// ``retire(_:)`` for every key in flight that `isRetired` picks (those a write of a composite's
    /// key changes).
    ///
    /// - Complexity: O(n) in the keys in flight.
    func retire(where isRetired: (Key) -> Bool) {
        state.withLock { state in
            for (key, flight) in state.flights where isRetired(key) {
                state.flights[key] = nil
                state.retired[flight.id] = flight
            }
        }
    }

    /// ``retire(_:)`` for every key (a loss or a return of coherence).
    func retireAll() {
        state.withLock { state in
            for flight in state.flights.values { state.retired[flight.id] = flight }
            state.flights = [:]
        }
    }

    /// The number of operations started and not yet finished, including those every waiter left.
    var runningCount: Int { state.withLock { $0.running } }

    /// The number of callers waiting for `key`.
    func waiterCount(forKey key: Key) -> Int { state.withLock { $0.flights[key]?.waiters.count ?? 0 } }

    /// Returns the result of `operation` for `key`, sharing one run among concurrent callers.
    ///
    /// The unstructured task exists because the operation must outlive any one waiter: it is cancelled
    /// only when every waiter is.
    ///
    /// - Parameters:
    ///   - key: The key whose callers share one run.
    ///   - operation: The work; only the first caller's runs.
    /// - Returns: The result of the shared run.
    /// - Throws: The operation's error, or `CancellationError` when the calling task is cancelled.
    func value(
        forKey key: Key,
        operation: @escaping @Sendable () async throws -> Value
    ) async throws -> Value {
        try await value(forKey: key, operation: operation, settle: { $0 })
    }

    /// Returns the settled result of `operation` for `key`, sharing one run among concurrent callers.
    ///
    /// - Parameters:
    ///   - key: The key whose callers share one run.
    ///   - operation: The work; only the first caller's runs. It may return more than the waiters
    ///     get (what it did, to report), which `settle` turns into their result.
    ///   - settle: Runs once the flight has left the table, before the waiters are resumed. Callbacks
    ///     into user code belong here: a callback that asks for the same key starts a new flight
    ///     instead of waiting on the one that is calling it.
    /// - Returns: The settled result of the shared run.
    /// - Throws: The settled error, or `CancellationError` when the calling task is cancelled.
    func value<Output: Sendable>(
        forKey key: Key,
        operation: @escaping @Sendable () async throws -> Output,
        settle: @escaping @Sendable (Result<Output, any Error>) -> Result<Value, any Error>
    ) async throws -> Value {
        let waiterID = state.withLock { $0.makeID() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
                let cancelledAlready = state.withLock { state -> Bool in
                    // Checked inside the lock: a cancellation handler that runs later finds this waiter.
                    if Task.isCancelled { return true }
                    if state.flights[key] != nil {
                        state.flights[key]?.waiters[waiterID] = continuation
                        return false
                    }
                    let flightID = state.makeID()
                    state.running += 1
                    state.flights[key] = Flight(key: key, id: flightID, task: nil, waiters: [waiterID: continuation])
                    // Creating the task inside the lock is safe: it cannot finish before we unlock,
                    // since finishing takes the lock.
                    state.flights[key]?.task = FetchTask.run { [self] in
                        let result: Result<Output, any Error>
                        do {
                            result = .success(try await operation())
                        } catch {
                            result = .failure(error)
                        }
                        finish(key: key, flightID: flightID, with: settle, of: result)
                    }
                    return false
                }
                if cancelledAlready { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            cancelWaiter(waiterID, forKey: key)
        }
    }

    private func finish<Output>(
        key: Key,
        flightID: UInt64,
        with settle: (Result<Output, any Error>) -> Result<Value, any Error>,
        of result: Result<Output, any Error>
    ) {
        let waiterIDs = state.withLock { state -> [UInt64] in
            state.running -= 1
            let flight: Flight
            if let current = state.flights[key], current.id == flightID {
                state.flights[key] = nil
                flight = current
            } else if let retired = state.retired.removeValue(forKey: flightID) {
                flight = retired
            } else {
                return []
            }
            state.settling.merge(flight.waiters) { _, new in new }
            return Array(flight.waiters.keys)
        }
        // Settled even when every waiter has gone: what the operation did still has to be reported.
        // Settling calls user code, which may take long (a delegate's fallback may fetch): a waiter
        // cancelled meanwhile is resumed by `cancelWaiter`, and only the others get the result.
        let settled = settle(result)
        let waiters = state.withLock { state in waiterIDs.compactMap { state.settling.removeValue(forKey: $0) } }
        for waiter in waiters { waiter.resume(with: settled) }
    }

    private func cancelWaiter(_ waiterID: UInt64, forKey key: Key) {
        let (waiter, abandoned) = state.withLock {
            state -> (CheckedContinuation<Value, any Error>?, Task<Void, any Error>?) in
            if var flight = state.flights[key], let waiter = flight.waiters.removeValue(forKey: waiterID) {
                if flight.waiters.isEmpty {
                    state.flights[key] = nil
                    return (waiter, flight.task)
                }
                state.flights[key] = flight
                return (waiter, nil)
            }
            guard
                let id = state.retired.first(where: { $0.value.key == key && $0.value.waiters[waiterID] != nil })?.key,
                var flight = state.retired[id], let waiter = flight.waiters.removeValue(forKey: waiterID)
            else {
                // Its flight may be settling: it has left the tables but not resumed its waiters yet.
                return (state.settling.removeValue(forKey: waiterID), nil)
            }
            if flight.waiters.isEmpty {
                state.retired[id] = nil
                return (waiter, flight.task)
            }
            state.retired[id] = flight
            return (waiter, nil)
        }
        waiter?.resume(throwing: CancellationError())
        abandoned?.cancel()
    }
}
