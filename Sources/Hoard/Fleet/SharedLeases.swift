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
    /// - Parameters:
    ///   - key: The level's key (its canonical form).
    ///   - lookup: Reads the key's value; `nil` on a miss, a failure when the level failed (the wait
    ///     then ends: fetch by yourself).
    /// - Returns: The value found, the lease taken, or neither.
    func acquire<Found: Sendable>(
        forKey key: String,
        lookup: () async -> Result<Found?, CacheError>
    ) async -> Acquired<Found> {
        let deadline = ContinuousClock.now + waitLimit
        watch(key)
        defer { unwatch(key) }
        var pause = pauses.first
        while true {
            // Noted before the lease is asked for: a value announced from then on ends the pause.
            let seen = changes(of: key)
            let token = Self.makeToken()
            do {
                if try await level.takeLease(forKey: key, token: token, duration: leaseDuration) {
                    return await confirm(token, forKey: key, lookup: lookup)
                }
            } catch {
                HoardLogger.log(
                    .info,
                    "Fleet single fetch: cannot take the lease of \"\(key.prefix(100))\" (\(error)); fetching."
                )
                return .none
            }
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero, !Task.isCancelled else {
                if remaining <= .zero {
                    HoardLogger.log(
                        .info,
                        "Fleet single fetch: waited \(waitLimit) for another instance's fetch of \"\(key.prefix(100))\"; "
                            + "fetching."
                    )
                }
                return .none
            }
            await sleep(forKey: key, unlessChangedSince: seen, for: min(pause, remaining))
            pause = min(pause * 2, pauses.longest)
            switch await lookup() {
            case .success(let found?): return .found(found)
            case .success(nil): continue
            case .failure: return .none
            }
        }
    }

    /// Reads the key once more after its lease was taken.
    ///
    /// The previous holder may have stored its value, and ended its lease, between this instance's
    /// last read and its request. A value found is served and the lease released.
    private func confirm<Found: Sendable>(
        _ token: String,
        forKey key: String,
        lookup: () async -> Result<Found?, CacheError>
    ) async -> Acquired<Found> {
        guard case .success(let found?) = await lookup() else { return .lease(token: token) }
        // Awaited, as this path is rare: once the value is served, no lease of this fetch is left.
        await Self.release(forKey: key, token: token, level: level)
        return .found(found)
    }

    /// Ends the lease `token` holds on `key`, in the background (a failure is logged: the lease then
    /// ends by itself).
    func release(forKey key: String, token: String) {
        let level = level
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
