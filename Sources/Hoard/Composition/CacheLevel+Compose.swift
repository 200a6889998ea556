extension CacheLevel {
    /// Returns a level that reads this level first and `next` on a miss, filling this level from it.
    ///
    /// - `get`: this level; on any error but `CancellationError`, `next`, and the value found there is
    ///   stored in this level (a failed back-fill is logged and does not fail the get), unless a
    ///   write of the key ran while `next` was read: the get returns what it read, and stores nothing.
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
        cachedValue: (@Sendable (Key) -> Value?)?
    ) -> BasicCache<Key, Value> where Next.Key == Key, Next.Value == Value {
        // Writes, clears and memory warnings reach both levels, exactly as with `pushing(to:)`.
        let writes = pushing(to: next)
        // A back-fill must not land over a write made while its value was being read.
        let watch = WriteWatch()
        return BasicCache(
            get: { key in
                // Written out here rather than calling `readThrough`: a hit in the first level then
                // costs one async call less.
                do {
                    return try await self.get(key)
                } catch {
                    if error is CancellationError { throw error }
                }
                return try await self.fill(from: next, key, watching: watch)
            },
            set: { value, key in
                let stripe = watch.begin(key)
                defer { watch.end(stripe) }
                try await writes.set(value, forKey: key)
            },
            removeValue: { key in
                let stripe = watch.begin(key)
                defer { watch.end(stripe) }
                try await writes.removeValue(forKey: key)
            },
            clear: {
                watch.beginAll()
                defer { watch.endAll() }
                await writes.clear()
            },
            onMemoryWarning: writes.memoryWarning,
            cachedValue: cachedValue
        )
    }

    /// Returns a level that reads through to `other` and writes only to this level (read-through).
    ///
    /// - `get`: this level; on any error but `CancellationError`, `other`, and the value found there is
    ///   stored in this level (a failed store is logged and does not fail the get), unless a write of
    ///   the key ran while `other` was read.
    /// - `set`, `removeValue` and `clear` reach this level only; `onMemoryWarning` reaches both.
    ///
    /// - Parameter other: The level read on a miss.
    /// - Returns: The read-through level.
    public func backed<Other: CacheLevel>(by other: Other) -> BasicCache<Key, Value>
    where Other.Key == Key, Other.Value == Value {
        // A back-fill must not land over a write made while its value was being read.
        let watch = WriteWatch()
        return BasicCache(
            get: { key in
                do {
                    return try await self.get(key)
                } catch {
                    if error is CancellationError { throw error }
                }
                return try await self.fill(from: other, key, watching: watch)
            },
            set: { value, key in
                let stripe = watch.begin(key)
                defer { watch.end(stripe) }
                try await self.set(value, forKey: key)
            },
            removeValue: { key in
                let stripe = watch.begin(key)
                defer { watch.end(stripe) }
                try await self.removeValue(forKey: key)
            },
            clear: {
                watch.beginAll()
                defer { watch.endAll() }
                await self.clear()
            },
            onMemoryWarning: {
                self.onMemoryWarning()
                other.onMemoryWarning()
            }
        )
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
    }

    /// Reads `other` after a miss here, and stores here what it returns.
    ///
    /// With `watch`, the writes it watches win over the back-fill: a value read while one of them
    /// ran may be older than what it wrote or removed, so it is not stored here. A write that comes
    /// during the store itself (the few microseconds of a memory level's set) may still land under
    /// it: taking the value out again would lose that write where the level behind does not hold it
    /// (a `Fetcher`, whose writes do nothing, or `backed(by:)`).
    @inlinable
    func fill<Other: CacheLevel>(
        from other: Other,
        _ key: Key,
        watching watch: WriteWatch? = nil
    ) async throws -> Value where Other.Key == Key, Other.Value == Value {
        let mark = watch?.mark(key)
        try Task.checkCancellation()
        let value = try await other.get(key)
        // A write of the key was under way when the read began (no mark), or one began or ended since.
        if let watch, mark.map({ !watch.isUnchanged(since: $0) }) ?? true { return value }
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

/// The writes of a composition, counted so that a back-fill can tell whether one of its key ran while
/// it read.
///
/// Keys are spread over stripes by their hash value (a key that is not `Hashable` uses one stripe):
/// a write counts for every key of its stripe, so a write of another key may cost a back-fill (one
/// more miss later), never a value.
@usableFromInline
final class WriteWatch: Sendable {
    /// For each stripe: `epoch` changes when a write begins and when it ends; `running` counts the
    /// writes under way.
    private let stripes = Locked([(epoch: UInt64, running: Int)](repeating: (0, 0), count: WriteWatch.stripeCount))

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

    /// Notes a write of `key` beginning; returns its stripe, for ``end(_:)``.
    @usableFromInline
    func begin(_ key: some Sendable) -> Int {
        let stripe = Self.stripe(key)
        stripes.withLock {
            $0[stripe].epoch &+= 1
            $0[stripe].running += 1
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

    /// Notes a write of every key beginning (a clear).
    @usableFromInline
    func beginAll() {
        stripes.withLock { stripes in
            for stripe in stripes.indices {
                stripes[stripe].epoch &+= 1
                stripes[stripe].running += 1
            }
        }
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

    /// The moment a read of `key` begins, or `nil` when a write of its stripe is under way then.
    @usableFromInline
    func mark(_ key: some Sendable) -> Mark? {
        let stripe = Self.stripe(key)
        return stripes.withLock { $0[stripe].running == 0 ? Mark(stripe: stripe, epoch: $0[stripe].epoch) : nil }
    }

    /// Whether no write of the mark's stripe has begun or ended since, and none runs now.
    @usableFromInline
    func isUnchanged(since mark: Mark) -> Bool {
        stripes.withLock { $0[mark.stripe].epoch == mark.epoch && $0[mark.stripe].running == 0 }
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
