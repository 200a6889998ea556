import Foundation

/// One origin fetch per key for a whole fleet: the leases a cache takes on its shared level (see
/// ``CacheBuilder/fleetSingleFetch(leaseDuration:waitLimit:)``).
///
/// The instance that misses a key first takes its lease and fetches; the others wait for the value
/// to appear on the shared level, reading it again after a capped, growing pause, or at once when an
/// invalidation of the key comes (with ``CacheCoherence/invalidations``). A waiter tries to take the
/// lease again before each pause, so that it takes over when the holder released it (its fetch
/// failed) or the lease expired (the holder died). A waiter that has waited ``waitLimit``, and any
/// instance whose lease request fails, fetches by itself: leases save the origin work, they never
/// make a read wait on a server that is down.
///
/// The keys here are the level's (their canonical form), as invalidations name them.
final class SharedLeases: Sendable {
    /// What ``acquire(forKey:lookup:)`` ends with.
    enum Acquired<Found: Sendable>: Sendable {
        /// The value appeared while waiting.
        case found(Found)
        /// This instance holds the lease, with this token: it fetches, and stores with the token.
        case lease(token: String)
        /// No lease and no value (the wait limit passed, or the level failed): fetch without a lease.
        case none
    }

    let level: any LeasingCacheLevel<String, Data>
    /// How long a lease lasts unless its holder ends it.
    let leaseDuration: Duration
    /// The longest a waiter waits for the holder's value before fetching by itself.
    let waitLimit: Duration
    /// The first pause between two reads of a waiter, and the longest (each next one doubles).
    let pauses: (first: Duration, longest: Duration)
    /// The first pause by default.
    static let firstPause = Duration.milliseconds(2)
    /// The longest pause by default.
    static let longestPause = Duration.milliseconds(50)

    /// The keys some waiter of this cache waits for.
    private struct Watch {
        /// How many waiters watch the key.
        var watchers = 0
        /// How many times the key was announced changed while watched.
        var changes: UInt64 = 0
        /// The pauses under way, ended by a change of the key.
        var sleepers: [UInt64: Sleeper] = [:]
    }

    /// A pause under way: who waits, and the timer that ends it unless something else does first
    /// (cancelled then, so that no timer outlives its pause).
    private struct Sleeper {
        var continuation: CheckedContinuation<Void, Never>
        var timer: Task<Void, any Error>?

        func end() {
            timer?.cancel()
            continuation.resume()
        }
    }

    private struct State {
        var watches: [String: Watch] = [:]
        var lastID: UInt64 = 0
    }

    private let state = Locked(State())

    init(
        _ level: any LeasingCacheLevel<String, Data>,
        leaseDuration: Duration,
        waitLimit: Duration,
        pauses: (first: Duration, longest: Duration) = (firstPause, longestPause)
    ) {
        self.level = level
        self.leaseDuration = leaseDuration
        self.waitLimit = waitLimit
        self.pauses = pauses
    }

    /// A token no other fetch, in any process, makes.
    static func makeToken() -> String { UUID().uuidString }

    /// Takes the lease of `key`, or waits for its holder's value (see the type's discussion).
    ///
    /// The first request for the lease is an ordinary call of the level. Once the wait has begun,
    /// each read and request runs in a task of its own and is waited for only until the wait limit
    /// (see ``result(of:before:late:)``): a level that stops answering (a server that hangs, a
    /// cluster answering `CLUSTERDOWN` through an election) does not hold the wait past it, and a
    /// lease granted after it is released.
    ///
    /// - Parameters:
    ///   - key: The level's key (its canonical form).
    ///   - lookup: Reads the key's value; `nil` on a miss, a failure when the level failed (the wait
    ///     then ends: fetch by yourself). A read made while waiting may be left to finish alone:
    ///     keep its side effects for what it returns to the wait.
    ///   - dropLate: Gets what a read the wait stopped waiting for returned.
    /// - Returns: The value found, the lease taken, or neither.
    func acquire<Found: Sendable>(
        forKey key: String,
        lookup: @escaping @Sendable () async -> Result<Found?, CacheError>,
        dropLate: @escaping @Sendable (Result<Found?, CacheError>) -> Void
    ) async -> Acquired<Found> {
        let deadline = ContinuousClock.now + waitLimit
        watch(key)
        defer { unwatch(key) }
        var pause = pauses.first
        var isWaiting = false
        while true {
            // A read that came back empty after the limit ends the wait: no lease request follows it.
            if isWaiting, ContinuousClock.now >= deadline { return waitEnded(forKey: key) }
            // Noted before the lease is asked for: a value announced from then on ends the pause.
            let seen = changes(of: key)
            let token = Self.makeToken()
            do {
                // Once waiting, bounded by the wait's limit.
                let taken =
                    isWaiting
                    ? try await takeLease(forKey: key, token: token, before: callDeadline(deadline))
                    : try await level.takeLease(forKey: key, token: token, duration: leaseDuration)
                guard let taken else { return waitEnded(forKey: key) }
                if taken {
                    return await confirm(
                        token,
                        forKey: key,
                        within: isWaiting ? deadline : nil,
                        lookup: lookup,
                        dropLate: dropLate
                    )
                }
            } catch {
                HoardLogger.log(
                    .info,
                    "Fleet single fetch: cannot take the lease of \"\(key.prefix(100))\" (\(error)); fetching."
                )
                // The server may have granted it all the same (a reply lost to the caller's
                // cancellation or to a timeout): nobody will store under it. An error reply is the
                // server's refusal: nothing to release.
                if !Self.isRefusal(error) { Self.releaseInBackground(forKey: key, token: token, level: level) }
                return .none
            }
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero, !Task.isCancelled else { return waitEnded(forKey: key) }
            await sleep(forKey: key, unlessChangedSince: seen, for: min(pause, remaining))
            pause = min(pause * 2, pauses.longest)
            isWaiting = true
            switch await Self.result(of: lookup, before: callDeadline(deadline), late: dropLate) {
            case .success(let found?): return .found(found)
            case .success(nil): continue
            case .failure: return .none
            case nil: return waitEnded(forKey: key)
            }
        }
    }

    /// Asks for the lease of `key` with `token`, waiting for the answer until `deadline`.
    ///
    /// - Returns: Whether the lease was granted, or `nil` when the deadline came first; a lease
    ///   granted later is released.
    private func takeLease(
        forKey key: String,
        token: String,
        before deadline: ContinuousClock.Instant
    ) async throws -> Bool? {
        let (level, duration) = (level, leaseDuration)
        let answer = await Self.result(
            of: { () async -> Result<Bool, any Error> in
                do {
                    return .success(try await level.takeLease(forKey: key, token: token, duration: duration))
                } catch {
                    return .failure(error)
                }
            },
            before: deadline,
            late: { answer in
                // Granted, or failed after the server may have granted it.
                switch answer {
                case .success(false): return
                case .failure(let error) where Self.isRefusal(error): return
                default: Self.releaseInBackground(forKey: key, token: token, level: level)
                }
            }
        )
        return try answer?.get()
    }

    /// Whether a lease request's error is the server's answer, so that no lease was granted.
    private static func isRefusal(_ error: any Error) -> Bool {
        (error as? CacheError)?.code == .serverRefused
    }

    /// When a call of the wait (a read, a request for the lease) started now stops being waited
    /// for: at the wait's `deadline`, or after the longest pause when less is left, so that the
    /// last read, made as the limit comes, still has the time to find the holder's value.
    private func callDeadline(_ deadline: ContinuousClock.Instant) -> ContinuousClock.Instant {
        max(deadline, ContinuousClock.now + pauses.longest)
    }

    /// What a wait that ran out of time or was cancelled ends with: no value and no lease.
    private func waitEnded<Found: Sendable>(forKey key: String) -> Acquired<Found> {
        if !Task.isCancelled {
            HoardLogger.log(
                .info,
                "Fleet single fetch: waited \(waitLimit) for another instance's fetch of \"\(key.prefix(100))\"; fetching."
            )
        }
        return .none
    }

    /// Runs `operation` in a task of its own and waits for its result until `deadline`, or until
    /// the caller is cancelled, whichever comes first.
    ///
    /// A call of the shared level ends within the level's command timeout, which may be longer than
    /// what is left of a wait: the wait does not follow it past its limit.
    ///
    /// - Returns: What `operation` returned, or `nil` when the deadline or the cancellation came
    ///   first; `late` then gets what it returns, once it has.
    static func result<Success: Sendable>(
        of operation: @escaping @Sendable () async -> Success,
        before deadline: ContinuousClock.Instant,
        late: @escaping @Sendable (Success) -> Void
    ) async -> Success? {
        // A caller cancelled already sends nothing (a lease request would take a lease for a while).
        guard !Task.isCancelled else { return nil }
        let race = Race<Success>()
        FetchTask.run {
            let value = await operation()
            if !race.answer(value) { late(value) }
        }
        let timer = FetchTask.run {
            try await Task.sleep(until: deadline, clock: .continuous)
            race.expire()
        }
        defer { timer.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { race.wait($0) }
        } onCancel: {
            race.expire()
        }
    }

    /// Who answers first in ``result(of:before:late:)``: the operation, or the deadline (or the
    /// caller's cancellation).
    private final class Race<Success: Sendable>: Sendable {
        private enum Phase {
            /// Neither has answered, and the caller does not wait yet.
            case running
            /// The caller waits.
            case waiting(CheckedContinuation<Success?, Never>)
            /// The operation answered before the caller waited.
            case answered(Success)
            /// The deadline came before the caller waited.
            case expired
            /// The caller has its answer.
            case over
        }

        private let phase = Locked(Phase.running)

        /// Hands the caller's continuation over: resumed at once when an answer came already.
        func wait(_ continuation: CheckedContinuation<Success?, Never>) {
            let answer = phase.withLock { phase -> Success?? in
                switch phase {
                case .running:
                    phase = .waiting(continuation)
                    return nil
                case .answered(let value):
                    phase = .over
                    return .some(value)
                case .expired:
                    phase = .over
                    return .some(nil)
                case .waiting, .over:
                    preconditionFailure("SharedLeases.Race: waited for twice")
                }
            }
            if let answer { continuation.resume(returning: answer) }
        }

        /// The operation's answer; returns whether the caller gets it (`false`: it came too late).
        func answer(_ value: Success) -> Bool {
            let (isTaken, waiter) = phase.withLock { phase -> (Bool, CheckedContinuation<Success?, Never>?) in
                switch phase {
                case .running:
                    phase = .answered(value)
                    return (true, nil)
                case .waiting(let continuation):
                    phase = .over
                    return (true, continuation)
                case .answered, .expired, .over:
                    return (false, nil)
                }
            }
            waiter?.resume(returning: value)
            return isTaken
        }

        /// The deadline or the caller's cancellation: the caller gets `nil` unless it has an answer.
        func expire() {
            let waiter = phase.withLock { phase -> CheckedContinuation<Success?, Never>? in
                switch phase {
                case .running:
                    phase = .expired
                    return nil
                case .waiting(let continuation):
                    phase = .over
                    return continuation
                case .answered, .expired, .over:
                    return nil
                }
            }
            waiter?.resume(returning: nil)
        }
    }

    /// Reads the key once more after its lease was taken.
    ///
    /// The previous holder may have stored its value, and ended its lease, between this instance's
    /// last read and its request. A value found is served and the lease released. With a
    /// `deadline` (a lease taken while waiting, whose wait ends then), the read and the release are
    /// each waited for until ``callDeadline(_:)`` only: without the read's answer, the lease is kept
    /// and the caller fetches.
    private func confirm<Found: Sendable>(
        _ token: String,
        forKey key: String,
        within deadline: ContinuousClock.Instant?,
        lookup: @escaping @Sendable () async -> Result<Found?, CacheError>,
        dropLate: @escaping @Sendable (Result<Found?, CacheError>) -> Void
    ) async -> Acquired<Found> {
        let read =
            if let deadline {
                await Self.result(of: lookup, before: callDeadline(deadline), late: dropLate)
            } else {
                await lookup()
            }
        guard case .success(let found?) = read else { return .lease(token: token) }
        // Once the value is served, no lease of this fetch is left: the release runs in a task of its
        // own, so that a caller cancelled meanwhile still sends it, and is awaited (this path is rare),
        // while waiting no longer than the wait's other calls.
        let release = FetchTask.run { [level] in await Self.release(forKey: key, token: token, level: level) }
        if let deadline {
            _ = await Self.result(of: { _ = try? await release.value }, before: callDeadline(deadline), late: { _ in })
        } else {
            _ = try? await release.value
        }
        return .found(found)
    }

    /// Ends the lease `token` holds on `key`, in the background (a failure is logged: the lease then
    /// ends by itself).
    func release(forKey key: String, token: String) {
        Self.releaseInBackground(forKey: key, token: token, level: level)
    }

    /// ``release(forKey:token:)`` on `level`.
    private static func releaseInBackground(
        forKey key: String,
        token: String,
        level: any LeasingCacheLevel<String, Data>
    ) {
        FetchTask.run { await Self.release(forKey: key, token: token, level: level) }
    }

    /// Ends the lease `token` holds on `key`; a failure is logged (the lease then ends by itself).
    private static func release(
        forKey key: String,
        token: String,
        level: any LeasingCacheLevel<String, Data>
    ) async {
        do {
            try await level.releaseLease(forKey: key, token: token)
        } catch {
            HoardLogger.log(
                .info,
                "Fleet single fetch: cannot release the lease of \"\(key.prefix(100))\": \(error)"
            )
        }
    }

    // MARK: - Waking the waiters

    /// Ends the pauses of the waiters of `keys` (level keys): they changed on the shared level.
    ///
    /// Called on the level's invalidation thread; quick, never blocks.
    func wake(_ keys: [String]) {
        let sleepers = state.withLock { state -> [Sleeper] in
            guard !state.watches.isEmpty else { return [] }
            var woken: [Sleeper] = []
            for key in keys where state.watches[key] != nil {
                state.watches[key]?.changes &+= 1
                if let sleepers = state.watches[key]?.sleepers { woken += sleepers.values }
                state.watches[key]?.sleepers = [:]
            }
            return woken
        }
        for sleeper in sleepers { sleeper.end() }
    }

    /// Ends every waiter's pause: any key may have changed.
    func wakeAll() {
        wake(state.withLock { Array($0.watches.keys) })
    }

    /// How many keys some waiter watches, for the tests.
    var watchedKeyCount: Int { state.withLock { $0.watches.count } }

    private func watch(_ key: String) {
        state.withLock { $0.watches[key, default: Watch()].watchers += 1 }
    }

    private func unwatch(_ key: String) {
        state.withLock { state in
            guard let watchers = state.watches[key]?.watchers else { return }
            if watchers <= 1 { state.watches[key] = nil } else { state.watches[key]?.watchers = watchers - 1 }
        }
    }

    private func changes(of key: String) -> UInt64 {
        state.withLock { $0.watches[key]?.changes ?? 0 }
    }

    /// Pauses for `duration`, or until `key` changes (at once if it changed since `seen`), or until
    /// the task is cancelled; never blocks a thread.
    private func sleep(forKey key: String, unlessChangedSince seen: UInt64, for duration: Duration) async {
        let id = state.withLock { state -> UInt64 in
            state.lastID &+= 1
            return state.lastID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let sleeps = state.withLock { state -> Bool in
                    // Checked inside the lock: a change or a cancellation that comes later finds it.
                    guard !Task.isCancelled, let watch = state.watches[key], watch.changes == seen else { return false }
                    state.watches[key]?.sleepers[id] = Sleeper(continuation: continuation)
                    return true
                }
                guard sleeps else { return continuation.resume() }
                // Unstructured on purpose: the timer must end the pause whoever else does not.
                let timer = FetchTask.run { [self] in
                    try await Task.sleep(for: duration)
                    endSleep(id, forKey: key)
                }
                let isPending = state.withLock { state -> Bool in
                    guard state.watches[key]?.sleepers[id] != nil else { return false }
                    state.watches[key]?.sleepers[id]?.timer = timer
                    return true
                }
                // Ended already (woken or cancelled): the timer has nothing left to end.
                if !isPending { timer.cancel() }
            }
        } onCancel: {
            endSleep(id, forKey: key)
        }
    }

    private func endSleep(_ id: UInt64, forKey key: String) {
        let sleeper = state.withLock { $0.watches[key]?.sleepers.removeValue(forKey: id) }
        sleeper?.end()
    }
}
