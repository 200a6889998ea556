extension CacheLevel {
    /// Returns a level that reads this level first and `next` on a miss, filling this level from it.
    ///
    /// - `get`: this level; on any error but `CancellationError`, `next`, and the value found there is
    ///   stored in this level (a failed back-fill is logged and does not fail the get).
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
                watch.begin()
                defer { watch.end() }
                try await writes.set(value, forKey: key)
            },
            removeValue: { key in
                watch.begin()
                defer { watch.end() }
                try await writes.removeValue(forKey: key)
            },
            clear: {
                watch.begin()
                defer { watch.end() }
                await writes.clear()
            },
            onMemoryWarning: writes.memoryWarning,
            cachedValue: cachedValue
        )
    }

    /// Returns a level that reads through to `other` and writes only to this level (read-through).
    ///
    /// - `get`: this level; on any error but `CancellationError`, `other`, and the value found there is
    ///   stored in this level (a failed store is logged and does not fail the get).
    /// - `set`, `removeValue` and `clear` reach this level only; `onMemoryWarning` reaches both.
    ///
    /// - Parameter other: The level read on a miss.
    /// - Returns: The read-through level.
    public func backed<Other: CacheLevel>(by other: Other) -> BasicCache<Key, Value>
    where Other.Key == Key, Other.Value == Value {
        BasicCache(
            get: { key in
                do {
                    return try await self.get(key)
                } catch {
                    if error is CancellationError { throw error }
                }
                return try await self.fill(from: other, key)
            },
            set: { value, key in try await self.set(value, forKey: key) },
            removeValue: { key in try await self.removeValue(forKey: key) },
            clear: { await self.clear() },
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
    /// ran may be older than what it wrote or removed, so it is not stored here, or is taken out
    /// again when the write came during the store.
    @inlinable
    func fill<Other: CacheLevel>(
        from other: Other,
        _ key: Key,
        watching watch: WriteWatch? = nil
    ) async throws -> Value where Other.Key == Key, Other.Value == Value {
        let mark = watch?.mark()
        try Task.checkCancellation()
        let value = try await other.get(key)
        if let watch, !watch.isUnchanged(since: mark) { return value }
        do {
            try await set(value, forKey: key)
        } catch {
            logFailedBackFill(key: key, error: error)
        }
        if let watch, !watch.isUnchanged(since: mark) {
            // A write began or ended during the store, which may have landed over it.
            try? await removeValue(forKey: key)
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

/// The writes of a composition, counted so that a back-fill can tell whether one ran while it read.
@usableFromInline
final class WriteWatch: Sendable {
    /// `epoch` changes when a write begins and when it ends; `running` counts the writes under way.
    private let state = Locked<(epoch: UInt64, running: Int)>((0, 0))

    @usableFromInline init() {}

    @usableFromInline func begin() { state.withLock { $0.epoch &+= 1; $0.running += 1 } }

    @usableFromInline func end() { state.withLock { $0.epoch &+= 1; $0.running -= 1 } }

    /// The moment a read begins, or `nil` when a write is under way then.
    @usableFromInline func mark() -> UInt64? {
        state.withLock { $0.running == 0 ? $0.epoch : nil }
    }

    /// Whether no write was under way at `mark`, none has begun or ended since, and none runs now.
    @usableFromInline func isUnchanged(since mark: UInt64?) -> Bool {
        state.withLock { state in mark.map { $0 == state.epoch && state.running == 0 } ?? false }
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
