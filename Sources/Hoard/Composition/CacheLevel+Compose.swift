extension CacheLevel {
    /// Returns a level that reads this level first and `next` on a miss, filling this level from it.
    ///
    /// - `get`: this level; on any error but `CancellationError`, `next`, and the value found there is
    ///   stored in this level (a failed back-fill is logged and does not fail the get), unless a
    ///   write of the key ran while `next` was read: the get returns what it read, and stores nothing.
    ///   A write that begins while a back-fill is being stored waits for that store, and lands over it;
    ///   a set or a removal whose task is cancelled while it waits throws `CancellationError` and
    ///   writes nothing.
    /// - `set`, `removeValue`, `clear` and `onMemoryWarning` reach both levels; when a set or a
    ///   removal fails in either, both are still tried and the first error is thrown.
    ///
    /// ```swift
    /// let images = memory.compose(disk).compose(network)
    /// ```
    /// - Parameter next: The level behind this one.
    /// - Returns: The composed level.
    @inlinable
    public func compose<Next: CacheLevel>(_ next: Next) -> BasicCache<Key, Value>
    where Next.Key == Key, Next.Value == Value {
        composed(with: next, cachedValue: nil)
    }

    /// The composition of ``compose(_:)``, with this level's synchronous answer for hits, if any.
    @inlinable
    func composed<Next: CacheLevel>(
        with next: Next,
        cachedValue: (@Sendable (Key) -> Value?)?,
        watch: WriteWatch = WriteWatch()
    ) -> BasicCache<Key, Value> where Next.Key == Key, Next.Value == Value {
        // Writes, clears and memory warnings reach both levels, exactly as with `pushing(to:)`.
        let writes = pushing(to: next)
        // Back-fills store into this level: the watch goes by what it stores each key under.
        let mapping = keyMapping
        return BasicCache(
            get: { key in
                // Written out here rather than calling `readThrough`: a hit in the first level then
                // costs one async call less.
                do {
                    return try await self.get(key)
                } catch {
                    if error is CancellationError { throw error }
                }
                return try await self.fill(from: next, key, watching: watch, mappedBy: mapping)
            },
            set: { value, key in
                let stripe = try await watch.begin(WriteWatch.watched(key, mappedBy: mapping))
                defer { watch.end(stripe) }
                try await writes.set(value, forKey: key)
            },
            removeValue: { key in
                let stripe = try await watch.begin(WriteWatch.watched(key, mappedBy: mapping))
                defer { watch.end(stripe) }
                try await writes.removeValue(forKey: key)
            },
            clear: {
                await watch.beginAll()
                defer { watch.endAll() }
                await writes.clear()
            },
            onMemoryWarning: writes.memoryWarning,
            cachedValue: cachedValue
        )
        // Keys one in either level stay related for the adapters over the composite.
        .mappingKeys(by: jointKeyMapping(with: next))
    }

    /// Returns a level that reads through to `other` and writes only to this level (read-through).
    ///
    /// - `get`: this level; on any error but `CancellationError`, `other`, and the value found there is
    ///   stored in this level (a failed store is logged and does not fail the get), unless a write of
    ///   the key ran while `other` was read. A write that begins while a back-fill is being stored
    ///   waits for that store, and lands over it; a set or a removal whose task is cancelled while
    ///   it waits throws `CancellationError` and writes nothing.
    /// - `set`, `removeValue` and `clear` reach this level only; `onMemoryWarning` reaches both.
    ///
    /// - Parameter other: The level read on a miss.
    /// - Returns: The read-through level.
    public func backed<Other: CacheLevel>(by other: Other) -> BasicCache<Key, Value>
    where Other.Key == Key, Other.Value == Value {
        backed(by: other, watch: WriteWatch())
    }

    /// ``backed(by:)``, with the watch that orders its writes and back-fills.
    func backed<Other: CacheLevel>(by other: Other, watch: WriteWatch) -> BasicCache<Key, Value>
    where Other.Key == Key, Other.Value == Value {
        // Back-fills store into this level: the watch goes by what it stores each key under.
        let mapping = keyMapping
        return BasicCache(
            get: { key in
                do {
                    return try await self.get(key)
                } catch {
                    if error is CancellationError { throw error }
                }
                return try await self.fill(from: other, key, watching: watch, mappedBy: mapping)
            },
            set: { value, key in
                let stripe = try await watch.begin(WriteWatch.watched(key, mappedBy: mapping))
                defer { watch.end(stripe) }
                try await self.set(value, forKey: key)
            },
            removeValue: { key in
                let stripe = try await watch.begin(WriteWatch.watched(key, mappedBy: mapping))
                defer { watch.end(stripe) }
                try await self.removeValue(forKey: key)
            },
            clear: {
                await watch.beginAll()
                defer { watch.endAll() }
                await self.clear()
            },
            onMemoryWarning: {
                self.onMemoryWarning()
                other.onMemoryWarning()
            }
        )
        .mappingKeys(by: jointKeyMapping(with: other))
    }

    /// Returns a level that reads only this level and writes to both (write-through).
    ///
    /// - `get`: this level only.
    /// - `set`, `removeValue`, `clear` and `onMemoryWarning` reach both levels; when a set or a
    ///   removal fails in either, both are still tried and the first error is thrown.
    ///
    /// - Parameter other: The level that receives every write too.
    /// - Returns: The write-through level.
    public func pushing<Other: CacheLevel>(to other: Other) -> BasicCache<Key, Value>
    where Other.Key == Key, Other.Value == Value {
        BasicCache(
            get: { key in try await self.get(key) },
            set: { value, key in
                try await Self.both(
                    { try await self.set(value, forKey: key) },
                    { try await other.set(value, forKey: key) }
                )
            },
            removeValue: { key in
                try await Self.both(
                    { try await self.removeValue(forKey: key) },
                    { try await other.removeValue(forKey: key) }
                )
            },
            clear: {
                await self.clear()
                await other.clear()
            },
            onMemoryWarning: {
                self.onMemoryWarning()
                other.onMemoryWarning()
            }
        )
        .mappingKeys(by: jointKeyMapping(with: other))
    }

    /// Reads `other` after a miss here, and stores here what it returns.
    ///
    /// The writes `watch` watches win over the back-fill: a value read while one of them ran may be
    /// older than what it wrote or removed, so it is not stored here; and a write that begins while
    /// the value is being stored waits for the store (see ``WriteWatch``), so it lands over it.
    /// The store is never taken out again instead: where the level behind does not hold the write
    /// (a `Fetcher`, whose writes do nothing, or `backed(by:)`), that would lose the write.
    ///
    /// When this level maps keys (`mapping`, its ``CacheLevel/keyMapping``), the watch goes by what it
    /// stores `key` under: a write of another key it makes one with `key` wins over the back-fill too.
    @inlinable
    func fill<Other: CacheLevel>(
        from other: Other,
        _ key: Key,
        watching watch: WriteWatch,
        mappedBy mapping: (@Sendable (Key) async throws -> StoredKey?)?
    ) async throws -> Value where Other.Key == Key, Other.Value == Value {
        let mark = watch.mark(await WriteWatch.watched(key, mappedBy: mapping))
        try Task.checkCancellation()
        let value = try await other.get(key)
        // No mark: a write of the stripe was under way when the read began. No store: one has begun
        // or ended since, or runs now.
        guard let mark, watch.beginStore(since: mark) else { return value }
        defer { watch.endStore(mark) }
        do {
            try await set(value, forKey: key)
        } catch {
            logFailedBackFill(key: key, error: error)
        }
        return value
    }

    /// Runs both operations, even when the first fails; throws the first error.
    @inlinable
    static func both(
        _ first: () async throws -> Void,
        _ second: () async throws -> Void
    ) async throws {
        var firstError: (any Error)?
        do {
            try await first()
        } catch {
            firstError = error
        }
        do {
            try await second()
        } catch {
            firstError = firstError ?? error
        }
        if let firstError { throw firstError }
    }
}

/// The writes of a composition and its back-fills' stores, ordered per stripe of keys so that a
/// back-fill never lands over a write.
///
/// A back-fill notes its stripe's epoch before it reads the next level, and stores only if no write
/// of the stripe has begun or ended since and none runs (``beginStore(since:)``, atomically). A write
/// counts as running from ``begin(_:)``, which then waits for the stores of its stripe under way:
/// so its own stores into the first level start after theirs have returned, and no store can start
/// while it runs. Either the back-fill's store begins first and the write lands over it, or the
/// write begins first and the back-fill stores nothing.
///
/// The wait cannot deadlock: a write waits only for stores that began before it, and a store waits
/// for nothing of the watch; a store could wait for that write only if the first level's own `set`
/// waited for a write of the same composition. No lock is held across a suspension: a write waits
/// on a continuation, resumed by the last store of its stripe once it has released the lock, or
/// by the cancellation of its task (a set or a removal then ends as a write that wrote nothing; a
/// clear, which cannot throw, keeps waiting).
///
/// Keys are spread over stripes by their hash value (a key that is not `Hashable` uses one stripe):
/// a write counts for every key of its stripe, so a write of another key may cost a back-fill (one
/// more miss later), or wait for another key's back-fill store, never a value.
@usableFromInline
final class WriteWatch: Sendable {
    /// One stripe's writes and back-fill stores.
    private struct Stripe: Sendable {
        /// Changes when a write begins and when it ends.
        var epoch: UInt64 = 0
        /// The writes under way, those waiting for stores included.
        var running = 0
        /// The back-fill stores under way.
        var storing = 0
        /// The writes waiting for `storing` to come down to zero, each with its number (the
        /// cancellation of a set or a removal takes its own out).
        var waiters: [Waiter] = []
    }

    /// A write waiting for a stripe's stores, and its number.
    private typealias Waiter = (number: UInt64, continuation: CheckedContinuation<Void, any Error>)

    private let stripes = Locked([Stripe](repeating: Stripe(), count: WriteWatch.stripeCount))
    /// The number of the next write to wait.
    private let waiterNumbers = Locked<UInt64>(0)

    /// Enough that writes of other keys rarely cost a fill: at 64 writes a second and half-second
    /// reads of the next level, about 3 % of fills.
    @usableFromInline static var stripeCount: Int { 1_024 }

    @usableFromInline init() {}

    /// Where a back-fill of `key` starts: its stripe and that stripe's epoch.
    @usableFromInline
    struct Mark: Sendable {
        let stripe: Int
        let epoch: UInt64
    }

    private static func stripe(_ key: some Sendable) -> Int {
        guard let hashable = key as? any Hashable else { return 0 }
        return Int(UInt(bitPattern: hashable.hashValue) % UInt(stripeCount))
    }

    /// Notes a write of `key` beginning, and waits for the back-fill stores of its stripe under way;
    /// returns its stripe, for ``end(_:)``.
    ///
    /// - Throws: `CancellationError` when the task is cancelled while it waits; the write has then
    ///   ended (no ``end(_:)`` to call) and must write nothing.
    @usableFromInline
    func begin(_ key: some Sendable) async throws -> Int {
        let stripe = Self.stripe(key)
        let isStoring = stripes.withLock {
            $0[stripe].epoch &+= 1
            $0[stripe].running += 1
            return $0[stripe].storing > 0
        }
        if isStoring {
            do {
                try await storesEnded(stripe, isCancellable: true)
            } catch {
                end(stripe)
                throw error
            }
        }
        return stripe
    }

    /// Notes the end of a write that ``begin(_:)`` returned `stripe` for.
    @usableFromInline
    func end(_ stripe: Int) {
        stripes.withLock {
            $0[stripe].epoch &+= 1
            $0[stripe].running -= 1
        }
    }

    /// Notes a write of every key beginning (a clear), and waits for every back-fill store under way.
    @usableFromInline
    func beginAll() async {
        let storing = stripes.withLock { stripes in
            var storing: [Int] = []
            for stripe in stripes.indices {
                stripes[stripe].epoch &+= 1
                stripes[stripe].running += 1
                if stripes[stripe].storing > 0 { storing.append(stripe) }
            }
            return storing
        }
        for stripe in storing { try? await storesEnded(stripe, isCancellable: false) }
    }

    /// Notes the end of a write of every key.
    @usableFromInline
    func endAll() {
        stripes.withLock { stripes in
            for stripe in stripes.indices {
                stripes[stripe].epoch &+= 1
                stripes[stripe].running -= 1
            }
        }
    }

    /// What the watch stripes `key` by: what the first level stores it under, when it maps keys.
    ///
    /// A write of a key the first level makes one with `key` then counts as a write of `key`. Else
    /// `key` itself (also when the mapping throws: the write then throws it too, and writes nothing).
    @usableFromInline
    static func watched<Key: Sendable>(
        _ key: Key,
        mappedBy mapping: (@Sendable (Key) async throws -> StoredKey?)?
    ) async -> any Sendable {
        guard let mapping, let stored = try? await mapping(key) else { return key }
        return stored
    }

    /// The moment a read of `key` begins, or `nil` when a write of its stripe is under way then.
    @usableFromInline
    func mark(_ key: some Sendable) -> Mark? {
        let stripe = Self.stripe(key)
        return stripes.withLock { $0[stripe].running == 0 ? Mark(stripe: stripe, epoch: $0[stripe].epoch) : nil }
    }

    /// Notes a back-fill store beginning, if no write of the mark's stripe has begun or ended since
    /// and none runs now; returns whether it may store (then it calls ``endStore(_:)`` once done).
    @usableFromInline
    func beginStore(since mark: Mark) -> Bool {
        stripes.withLock {
            guard $0[mark.stripe].epoch == mark.epoch && $0[mark.stripe].running == 0 else { return false }
            $0[mark.stripe].storing += 1
            return true
        }
    }

    /// Notes the end of a back-fill store that ``beginStore(since:)`` allowed; the writes waiting for
    /// the last store of the stripe go on.
    @usableFromInline
    func endStore(_ mark: Mark) {
        let waiters = stripes.withLock { stripes -> [Waiter] in
            stripes[mark.stripe].storing -= 1
            guard stripes[mark.stripe].storing == 0 else { return [] }
            defer { stripes[mark.stripe].waiters = [] }
            return stripes[mark.stripe].waiters
        }
        for waiter in waiters { waiter.continuation.resume() }
    }

    /// Waits until no back-fill store of `stripe` is under way.
    ///
    /// A write of the stripe runs, so no store can begin meanwhile: the wait ends once those under
    /// way have.
    ///
    /// - Throws: `CancellationError` when `isCancellable` and the task is cancelled first.
    private func storesEnded(_ stripe: Int, isCancellable: Bool) async throws {
        let number = waiterNumbers.withLock { next in
            defer { next &+= 1 }
            return next
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // Checked under the lock that the cancellation handler takes: either the handler
                // finds this waiter, or the waiter sees the cancellation here.
                let outcome = stripes.withLock { stripes -> Result<Void, any Error>? in
                    guard stripes[stripe].storing > 0 else { return .success(()) }
                    if isCancellable && Task.isCancelled { return .failure(CancellationError()) }
                    stripes[stripe].waiters.append((number, continuation))
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            guard isCancellable else { return }
            let waiter = stripes.withLock { stripes -> Waiter? in
                guard let index = stripes[stripe].waiters.firstIndex(where: { $0.number == number }) else { return nil }
                return stripes[stripe].waiters.remove(at: index)
            }
            waiter?.continuation.resume(throwing: CancellationError())
        }
    }

    /// The writes waiting for back-fill stores, for tests.
    var waitingWrites: Int {
        stripes.withLock { $0.reduce(0) { $0 + $1.waiters.count } }
    }
}

/// Logs a value that could not be copied into the level in front; not generic, so that inlined
/// composition code can call it.
@usableFromInline
func logFailedBackFill(key: Any, error: any Error) {
    HoardLogger.log(.warning, "Could not copy a value into the level in front for key \(key): \(error)")
}

extension MemoryCacheLevel {
    /// Returns a level that reads this level first and `next` on a miss, filling this level from it.
    ///
    /// The same as ``CacheLevel/compose(_:)``; a hit in memory is served without suspending, and the
    /// result keeps that fast path when composed again: `memory.compose(disk).compose(network)`.
    /// - Parameter next: The level behind this one.
    /// - Returns: The composed level.
    @inlinable
    public func compose<Next: CacheLevel>(_ next: Next) -> BasicCache<Key, Value>
    where Next.Key == Key, Next.Value == Value {
        composed(with: next, cachedValue: { key in self.cachedValue(forKey: key) })
    }
}

extension BasicCache {
    /// Returns a level that reads this level first and `next` on a miss, filling this level from it.
    ///
    /// The same as ``CacheLevel/compose(_:)``; when this level answers some gets at once (a
    /// composition that starts with a ``MemoryCacheLevel``), the result does too.
    /// - Parameter next: The level behind this one.
    /// - Returns: The composed level.
    @inlinable
    public func compose<Next: CacheLevel>(_ next: Next) -> BasicCache<Key, Value>
    where Next.Key == Key, Next.Value == Value {
        composed(with: next, cachedValue: { key in self.cachedValue(forKey: key) })
    }
}
