import Foundation

/// A cache's shared level (for example a Redis server several instances use), with the writes it has
/// yet to make, in order for each key.
///
/// Reads go straight to the level. Writes are queued and made in the background by a few workers:
/// the latest operation of each key only, one at a time per key, so that two sets of one key never
/// land out of order. A clear is a barrier: what was queued before it is dropped, what is under way
/// finishes first, and what is queued after it waits for it. ``flush()`` waits for every write (and
/// clear) queued before it. A failed write is counted and reported, never retried: the shared level
/// is a cache too.
///
/// Each queued change holds a ticket (its generation) in `outstanding` until the change that settles
/// it has been made: its own write, the later write of the key that replaced it before it was
/// taken, or the clear that dropped it. A flush waits for every ticket up to its own generation, so
/// it never returns while the level may lack the state a key had when it was called.
@usableFromInline
final class SharedLevel: Sendable {
    /// One queued change.
    enum Operation: Sendable {
        /// Store the bytes `encode` makes (the envelope around the serialized value), until `expiresAt`;
        /// with a lease token, only if that lease still holds (a fetched value, with
        /// ``SharedLeases``).
        case set(encode: @Sendable () throws -> Data, expiresAt: Date?, lease: String? = nil)
        case remove
    }

    /// What the reporter hears of a write that failed.
    typealias FailureHandler = @Sendable (_ key: String, _ error: CacheError) -> Void
    /// Told, outside every lock, whether a queued write was made: for `save`.
    typealias Completion = @Sendable (Result<Void, CacheError>) -> Void

    struct Pending: Sendable {
        /// The ticket: the generation of the first operation of the key this one replaced (or its
        /// own), held in `outstanding` until this operation is made.
        var generation: UInt64
        var operation: Operation
        /// The saves waiting for this operation, with those of the operations it replaced.
        var waiters: [Completion] = []
    }

    /// A clear asked for and not made yet.
    struct Clear: Sendable {
        var generation: UInt64
        /// The tickets of the operations it dropped, settled once it is made.
        var dropped: [UInt64] = []
        /// The saves waiting for the operations it dropped: told once it is made.
        var waiters: [Completion] = []
        /// The keys of those saves, whose failure is reported when the clear fails.
        var savedKeys: [String] = []
    }

    struct State: Sendable {
        var pending: [String: Pending] = [:]
        /// Keys whose latest operation waits for a worker, in order.
        var queue = FrontQueue<String>()
        /// The keys whose write is under way, with that write's ticket.
        var inFlight: [String: UInt64] = [:]
        var workers = 0
        var generation: UInt64 = 0
        /// The clears asked for and not done, in order; writes wait while there is one.
        var clears: [Clear] = []
        var isClearing = false
        /// The tickets of the changes not made yet (queued, under way, or dropped by a clear not made
        /// yet), clears included.
        var outstanding = Tickets()
        /// Each flush, with the generation it waits for.
        var flushes: [(generation: UInt64, continuation: CheckedContinuation<Void, Never>)] = []
        /// Each wait for one key's own changes (see ``waitForOwnChanges(of:)``), with their tickets.
        var changeWaits: [(tickets: [UInt64], continuation: CheckedContinuation<Void, Never>)] = []
        /// Resumed when no write is under way, for the clear that waits for that.
        var idleWaiter: CheckedContinuation<Void, Never>?
        /// Keys invalidated while one of this cache's own writes of them was queued or under way: told
        /// to ``invalidationHandler`` once the last of those writes is made.
        var deferredInvalidations: Set<String> = []
        /// Told the keys whose deferred invalidation is due (see ``defersInvalidation(of:)``).
        var invalidationHandler: (@Sendable (String) -> Void)?
        /// Told the key of each write made (or failed), and `nil` for each clear made (see
        /// ``setLandedHandler(_:)``).
        var landedHandler: (@Sendable (String?) -> Void)?
        /// The bytes of this cache's last write of each key made since that key's last
        /// invalidation: the value whose echo may still come (see ``takeWrittenBytes(of:)``).
        var written: [String: Data] = [:]
        /// The lock a write's completion runs under (see ``setCompletionLock(_:)``).
        var completionLock: (@Sendable (String, () -> Void) -> Void)?
    }

    let level: any CacheLevel<String, Data>
    /// The leases for one fetch per key across the fleet, with
    /// ``CacheBuilder/fleetSingleFetch(leaseDuration:waitLimit:)``: every write then ends the key's
    /// lease, and a fetched value is stored only if its lease still holds.
    let leases: SharedLeases?
    /// The most writes under way at once.
    static let workerLimit = 8
    let state = Locked(State())
    private let onFailure: FailureHandler
    /// Told when a write was made.
    private let onSuccess: @Sendable () -> Void
    /// The cache's clock (``CacheBuilder/clock(_:)``), which the expiry dates of its writes are
    /// measured by.
    private let clock: @Sendable () -> Date

    init(
        _ level: any CacheLevel<String, Data>,
        onFailure: @escaping FailureHandler,
        onSuccess: @escaping @Sendable () -> Void = {},
        leases: SharedLeases? = nil,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.clock = clock
        self.level = level
        self.leases = leases
        self.onFailure = onFailure
        self.onSuccess = onSuccess
    }

    // MARK: - Reading

    /// The bytes stored for `key`: `nil` on a miss, the error when the level failed.
    ///
    /// The level is asked for the key's canonical form (`String.canonicalKey`), as every write gives
    /// it, so that a level that compares bytes sees one key for every spelling `==` treats as one.
    func read(_ key: String) async -> Result<Data?, CacheError> {
        do {
            return .success(try await level.get(key.canonicalKey))
        } catch let error as CacheError where error.code == .notFound {
            return .success(nil)
        } catch let error as CacheError {
            return .failure(error)
        } catch {
            return .failure(.io("The shared level failed to read \"\(key.prefix(100))\".", key: key, underlying: error))
        }
    }

    /// The bytes stored for each of `keys`, as ``read(_:)-(String)`` reads one: in one request when
    /// the level reads many keys at once (``BatchReadingCacheLevel``), otherwise one read per key,
    /// all at once.
    func read(_ keys: [String]) async -> [Result<Data?, CacheError>] {
        if keys.count == 1 { return [await read(keys[0])] }
        if let batch = level as? any BatchReadingCacheLevel {
            let failure: CacheError
            do {
                let values = try await batch.values(forKeys: keys.map(\.canonicalKey))
                if values.count == keys.count { return values.map { .success($0) } }
                failure = .io("The shared level answered \(values.count) values for \(keys.count) keys.", key: nil)
            } catch let error as CacheError {
                failure = error
            } catch {
                failure = .io("The shared level failed to read \(keys.count) keys.", key: nil, underlying: error)
            }
            return keys.map { _ in .failure(failure) }
        }
        return await withTaskGroup(of: (Int, Result<Data?, CacheError>).self) { group in
            for (index, key) in keys.enumerated() { group.addTask { (index, await self.read(key)) } }
            var results = [Result<Data?, CacheError>](repeating: .success(nil), count: keys.count)
            for await (index, result) in group { results[index] = result }
            return results
        }
    }

    // MARK: - Writing

    /// Queues `operation` as the latest change of `key`; it is made in the background.
    ///
    /// - Parameters:
    ///   - operation: The write or removal to make.
    ///   - key: The key it changes.
    ///   - waiter: Told once the level has the operation, or once a later change of the key replaced
    ///     it before it was made (for `save`).
    func enqueue(_ operation: Operation, forKey key: String, completion waiter: Completion? = nil) {
        let starts = state.withLock { state -> Int in
            state.generation &+= 1
            var latest = Pending(generation: state.generation, operation: operation)
            if let replaced = state.pending[key] {
                // The replaced operation is settled when this one is made: it keeps its ticket, so
                // that a flush that waits for it waits for this one.
                latest.generation = replaced.generation
                latest.waiters = replaced.waiters
            } else {
                state.outstanding.insert(state.generation)
                if state.inFlight[key] == nil { state.queue.append(key) }
            }
            if let waiter { latest.waiters.append(waiter) }
            state.pending[key] = latest
            return Self.workersToStart(&state)
        }
        startWorkers(starts)
    }

    /// Drops the writes queued so far and clears the level; writes queued later wait for the clear.
    ///
    /// Returns at once; ``flush()`` waits for the clear.
    func clear() {
        let (startsClear, due) = state.withLock { state -> (Bool, [String]) in
            let due = state.deferredInvalidations.subtracting(state.inFlight.keys)
            state.deferredInvalidations.subtract(due)
            state.generation &+= 1
            // The dropped operations are settled by the clear: their tickets stay outstanding, and
            // their saves wait, until it is made (the key's latest state, none, is what the level
            // gets then).
            var clear = Clear(generation: state.generation)
            for (key, pending) in state.pending {
                clear.dropped.append(pending.generation)
                clear.waiters += pending.waiters
                if !pending.waiters.isEmpty { clear.savedKeys.append(key) }
            }
            state.pending = [:]
            state.queue.removeAll()
            state.clears.append(clear)
            state.outstanding.insert(state.generation)
            defer { state.isClearing = true }
            return (!state.isClearing, due.isEmpty ? [] : Array(due))
        }
        if !due.isEmpty, let handler = state.withLock({ $0.invalidationHandler }) {
            for key in due { handler(key) }
        }
        if startsClear { FetchTask.run { [self] in await runClears() } }
    }

    /// How many ``flush()`` calls wait, for the tests.
    var waitingFlushCount: Int { state.withLock { $0.flushes.count } }

    /// Waits until every write and clear queued before the call has been made (or has failed).
    func flush() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let isDone = state.withLock { state -> Bool in
                if state.outstanding.isEmpty { return true }
                state.flushes.append((state.generation, continuation))
                return false
            }
            if isDone { continuation.resume() }
        }
    }

    /// Waits until this cache's own changes of `key` that are queued or under way when it is called
    /// (its latest write, the one being made, a clear) have been made or have failed; returns at
    /// once when there are none.
    ///
    /// For a read of the level: until then the level may still hold what those changes replace (a
    /// value this cache has removed, or overwritten with one memory no longer holds), which a read
    /// must not return. A change queued after the call is not waited for, so the wait ends after
    /// one write of the key at most besides the one under way, and the clears asked for before.
    func waitForOwnChanges(of key: String) async {
        guard let tickets = state.withLock({ Self.ownTickets(of: key, $0) }) else { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let isDone = state.withLock { state -> Bool in
                let waiting = tickets.filter(state.outstanding.contains)
                if waiting.isEmpty { return true }
                state.changeWaits.append((waiting, continuation))
                return false
            }
            if isDone { continuation.resume() }
        }
    }

    /// The tickets of the own changes of `key` not made yet, or `nil` when there are none; called
    /// holding the lock.
    private static func ownTickets(of key: String, _ state: State) -> [UInt64]? {
        guard state.pending[key] != nil || state.inFlight[key] != nil || !state.clears.isEmpty else { return nil }
        var tickets = state.clears.map(\.generation)
        if let ticket = state.pending[key]?.generation { tickets.append(ticket) }
        if let ticket = state.inFlight[key] { tickets.append(ticket) }
        return tickets
    }

    /// How many workers to start: one per key waiting, up to the limit, none during a clear.
    private static func workersToStart(_ state: inout State) -> Int {
        guard !state.isClearing else { return 0 }
        let starts = max(0, min(workerLimit - state.workers, state.queue.count))
        state.workers += starts
        return starts
    }

    private func startWorkers(_ count: Int) {
        for _ in 0..<count { FetchTask.run { [self] in await work() } }
    }

    /// A worker: makes the latest write of one key after another until none waits (or a clear
    /// comes).
    private func work() async {
        while true {
            let next = state.withLock { state -> (String, Pending)? in
                while !state.isClearing, let key = state.queue.popFirst() {
                    guard let pending = state.pending.removeValue(forKey: key) else { continue }
                    state.inFlight[key] = pending.generation
                    return (key, pending)
                }
                state.workers -= 1
                return nil
            }
            guard let (key, pending) = next else {
                resumeIdleWaiter()
                return
            }
            let applied = await perform(pending.operation, forKey: key)
            let result = applied.map { _ in () }
            if case .failure(let error) = result { onFailure(key, error) } else { onSuccess() }
            let (lock, landed) = state.withLock { ($0.completionLock, $0.landedHandler) }
            // Before the write stops counting as outstanding: a flush that begins once it does (on
            // any thread), or that another worker resumes, returns only after this.
            landed?(key)
            var completed: ([CheckedContinuation<Void, Never>], (@Sendable (String) -> Void)?) = ([], nil)
            let complete = {
                completed = self.state.withLock { state in self.complete(key, pending, applied, &state) }
            }
            // Under the key's stripe: the write is no longer under way, and counted as a change of
            // the key, in one step (see `CacheEngine.store`'s fill check).
            if let lock { lock(key, complete) } else { complete() }
            let (resumed, due) = completed
            due?(key)
            for waiter in pending.waiters { waiter(result) }
            for continuation in resumed { continuation.resume() }
        }
    }

    /// Records that `pending`, the latest write of `key`, was made (or failed); called holding the
    /// lock.
    ///
    /// - Returns: The flushes now done, and the handler of a deferred invalidation now due.
    private func complete(
        _ key: String,
        _ pending: Pending,
        _ applied: Result<Data?, CacheError>,
        _ state: inout State
    ) -> ([CheckedContinuation<Void, Never>], (@Sendable (String) -> Void)?) {
        state.inFlight[key] = nil
        state.outstanding.remove(pending.generation)
        // Kept before the deferred invalidation is handed back and the saves return, so that the
        // echo of this write finds it. A failed write may have landed or not: its echo, if any,
        // drops the copy.
        if case .success(let bytes?) = applied, state.pending[key] == nil {
            if state.written.count >= Self.writtenLimit { state.written = [:] }
            state.written[key] = bytes
        } else {
            state.written[key] = nil
        }
        var due: (@Sendable (String) -> Void)?
        if state.pending[key] != nil {
            // A newer change of the key waited for this one: its turn now.
            state.queue.append(key)
        } else if state.deferredInvalidations.remove(key) != nil {
            due = state.invalidationHandler
        }
        return (Self.takeDoneFlushes(&state), due)
    }

    /// Resumes the clear waiting for the workers to stop, once none is left.
    private func resumeIdleWaiter() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard state.workers == 0 else { return nil }
            defer { state.idleWaiter = nil }
            return state.idleWaiter
        }
        waiter?.resume()
    }

    /// Makes the clears asked for, one after another, once no write is under way; then lets the
    /// writes queued meanwhile go.
    private func runClears() async {
        while true {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let isIdle = state.withLock { state -> Bool in
                    if state.workers == 0 { return true }
                    state.idleWaiter = continuation
                    return false
                }
                if isIdle { continuation.resume() }
            }
            let through = state.withLock { $0.clears.last?.generation ?? 0 }
            let failure = await makeClear()
            // Before the clears stop counting as outstanding (see `work()`).
            state.withLock { $0.landedHandler }?(nil)
            let (starts, resumed, waiters, savedKeys, isDone) = state.withLock {
                state -> (Int, [CheckedContinuation<Void, Never>], [Completion], [String], Bool) in
                var waiters: [Completion] = []
                var savedKeys: [String] = []
                state.written = [:]
                for clear in state.clears where clear.generation <= through {
                    state.outstanding.remove(clear.generation)
                    state.outstanding.subtract(clear.dropped)
                    waiters += clear.waiters
                    savedKeys += clear.savedKeys
                }
                state.clears.removeAll { $0.generation <= through }
                let resumed = Self.takeDoneFlushes(&state)
                guard state.clears.isEmpty else { return (0, resumed, waiters, savedKeys, false) }
                state.isClearing = false
                return (Self.workersToStart(&state), resumed, waiters, savedKeys, true)
            }
            // A save the clear dropped is made once the level holds nothing for its key; when the
            // clear failed, the level may still hold an older value, and the save failed with it,
            // reported as a failed write of its key.
            if let failure { for key in savedKeys { onFailure(key, failure) } }
            for waiter in waiters { waiter(failure.map { .failure($0) } ?? .success(())) }
            for continuation in resumed { continuation.resume() }
            startWorkers(starts)
            if isDone { return }
        }
    }

    /// Clears the level; returns why it failed, when the level can tell (see
    /// ``ClearReportingCacheLevel``).
    private func makeClear() async -> CacheError? {
        guard let reporting = level as? any ClearReportingCacheLevel else {
            await level.clear()
            return nil
        }
        do {
            try await reporting.removeAll()
            return nil
        } catch {
            HoardLogger.log(.warning, "Clearing the shared level failed: \(error)")
            if let error = error as? CacheError { return error }
            return .io("The shared level failed to clear.", key: nil, underlying: error)
        }
    }

    /// The flushes whose writes are all made, and the waits for one key's changes that are over;
    /// called holding the lock.
    private static func takeDoneFlushes(_ state: inout State) -> [CheckedContinuation<Void, Never>] {
        var done: [CheckedContinuation<Void, Never>] = []
        if !state.changeWaits.isEmpty {
            state.changeWaits.removeAll { wait in
                guard !wait.tickets.contains(where: state.outstanding.contains) else { return false }
                done.append(wait.continuation)
                return true
            }
        }
        guard !state.flushes.isEmpty else { return done }
        let oldest = state.outstanding.oldest ?? .max
        state.flushes.removeAll { flush in
            guard flush.generation < oldest else { return false }
            done.append(flush.continuation)
            return true
        }
        return done
    }

    /// `deadline`, a date by the cache's clock, as the date of the host's clock as far from now.
    ///
    /// A level measures a value's time to live from the host's clock (`SET … PX` on Redis). The two
    /// dates are one with the default clock; with a clock of another time (a test's, a server's),
    /// the level would otherwise keep a value for longer than it has left, or drop it at once.
    private func hostDate(of deadline: Date?) -> Date? {
        deadline.map { Date(timeIntervalSinceNow: $0.timeIntervalSince(clock())) }
    }

    /// Makes one write, under the key's canonical form (see ``read(_:)``); runs the serializer, so
    /// holds no lock.
    ///
    /// - Returns: The bytes stored (`nil` for a removal), or the error.
    private func perform(_ operation: Operation, forKey key: String) async -> Result<Data?, CacheError> {
        let levelKey = key.canonicalKey
        do {
            switch operation {
            case .set(let encode, let deadline, let lease):
                let expiresAt = hostDate(of: deadline)
                let bytes: Data
                do {
                    LockOrder.assertNoneHeld("calling the serializer")
                    bytes = try encode()
                } catch {
                    if let lease {
                        // A fetched value: its lease was taken on a miss, so what the level holds now
                        // is newer (a write of another instance, which ended the lease) and stays.
                        leases?.release(forKey: levelKey, token: lease)
                    } else if case .failure(let failure) = await perform(.remove, forKey: key) {
                        // The level holds an older value than the one that failed: it must not be
                        // served in place of the newer one, here or by the other instances.
                        HoardLogger.log(.warning, failure.message)
                    }
                    return .failure(.serializationFailed(key: key, underlying: error))
                }
                if let leases {
                    return try await leaseWrite(bytes, forKey: levelKey, expiresAt: expiresAt, lease: lease, leases)
                } else if let expiring = level as? any ExpiringCacheLevel<String, Data> {
                    try await expiring.set(bytes, forKey: levelKey, expiresAt: expiresAt)
                } else {
                    try await level.set(bytes, forKey: levelKey)
                }
                return .success(bytes)
            case .remove:
                if let leases {
                    try await leases.level.removeValueEndingLease(forKey: levelKey)
                } else {
                    try await level.removeValue(forKey: levelKey)
                }
                return .success(nil)
            }
        } catch let error as CacheError {
            return .failure(error)
        } catch {
            return .failure(
                .io("The shared level failed to write \"\(key.prefix(100))\".", key: key, underlying: error)
            )
        }
    }
}
