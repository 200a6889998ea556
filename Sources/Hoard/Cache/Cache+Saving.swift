import Dispatch
import Foundation

extension Cache {
    /// Stores a value, with the builder's default expiry, and returns once it is in its file on disk.
    ///
    /// ```swift
    /// try await notes.save(note, forKey: "groceries")   // on disk, or an error
    /// ```
    /// Like ``set(_:forKey:)``, the value is in memory (and readable) at once; this then waits for the
    /// background writer. The file is written through a temporary file and renamed into place, so a
    /// save that returned survives the process being killed. Without `fsync`, a power loss may still
    /// lose it (it is never torn). A later change of the key (a set, a removal, a clear) that lands
    /// first also ends the wait: the key's latest state is on disk.
    ///
    /// With a shared level, `save` also waits for the shared write (or for a clear queued after it,
    /// which drops it: if that clear fails, the save throws its error). Under
    /// ``CacheCoherence/invalidations`` the saved value stays in memory and on disk until the fleet
    /// changes, removes or flushes that key, or coherence is in doubt (a lost tracking connection):
    /// the server's announcement of this cache's own write does not drop it.
    ///
    /// - Throws: ``CacheError`` with code `serializationFailed` when the serializer fails, `io` when
    ///   the file cannot be written (the value stays in memory), `valueTooLarge` when its entry alone
    ///   exceeds `maxDiskBytes`, or `invalidConfiguration` when the cache has no disk level
    ///   (`maxDiskCount(0)`): nothing is stored then. The delegate hears of a failed write too.
    public func save(_ value: Value, forKey key: String) async throws {
        try await save(value, forKey: key, expiry: engine.defaultExpiry)
    }

    /// Stores a value that expires as `expiry` says, and returns once it is in its file on disk.
    ///
    /// See ``save(_:forKey:)``.
    ///
    /// - Throws: The errors of ``save(_:forKey:)``.
    public func save(_ value: Value, forKey key: String, expiry: CacheExpiry) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            save(value, forKey: key, expiry: expiry, whenOnDisk: { continuation.resume(with: $0.mapError { $0 }) })
        }
    }

    /// Stores a value with the builder's default expiry, blocking the calling thread until it is in
    /// its file on disk: ``save(_:forKey:)`` for synchronous code.
    ///
    /// - Precondition: Not called from code that the cache's background writer runs (a serializer
    ///   of a background write, a disk-eviction or failed-write callback of a cache on the same
    ///   container): it would wait for itself, so it stops the program with a message instead of
    ///   hanging. Use ``save(_:forKey:onComplete:)`` there.
    /// - Throws: The errors of ``save(_:forKey:)``.
    @available(*, noasync, message: "From async code, use save(_:forKey:).")
    public func saveAndWait(_ value: Value, forKey key: String) throws {
        try saveAndWait(value, forKey: key, expiry: engine.defaultExpiry)
    }

    /// Stores a value that expires as `expiry` says, blocking the calling thread until it is in its
    /// file on disk; see ``saveAndWait(_:forKey:)``.
    ///
    /// - Throws: The errors of ``save(_:forKey:)``.
    @available(*, noasync, message: "From async code, use save(_:forKey:expiry:).")
    public func saveAndWait(_ value: Value, forKey key: String, expiry: CacheExpiry) throws {
        precondition(
            disk?.isRunningOnWriter != true,
            "saveAndWait(_:forKey:) was called on the background writer of its own cache (from a serializer "
                + "or a disk callback): it would wait for itself. Use save(_:forKey:onComplete:) there."
        )
        let result = Locked<Result<Void, CacheError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        save(
            value,
            forKey: key,
            expiry: expiry,
            whenOnDisk: { outcome in
                result.withLock { $0 = outcome }
                done.signal()
            }
        )
        done.wait()
        try result.withLock { $0 }?.get()
    }

    /// Stores a value with the builder's default expiry, and calls `onComplete` once it is in its
    /// file on disk: ``save(_:forKey:)`` for code that uses callbacks.
    ///
    /// `onComplete` is called once, on a dispatch queue of its own (never the background writer), so
    /// it may block or call back into the cache.
    public func save(
        _ value: Value,
        forKey key: String,
        onComplete: @escaping @Sendable (Result<Void, CacheError>) -> Void
    ) {
        save(value, forKey: key, expiry: engine.defaultExpiry, onComplete: onComplete)
    }

    /// Stores a value that expires as `expiry` says, and calls `onComplete` once it is in its file
    /// on disk; see ``save(_:forKey:onComplete:)``.
    public func save(
        _ value: Value,
        forKey key: String,
        expiry: CacheExpiry,
        onComplete: @escaping @Sendable (Result<Void, CacheError>) -> Void
    ) {
        save(
            value,
            forKey: key,
            expiry: expiry,
            whenOnDisk: { result in
                DispatchQueue(label: "Hoard.save").async { onComplete(result) }
            }
        )
    }

    /// The body of every save: stores the value in every level and calls `whenStored` once it is in
    /// its file and on the shared level (from a background writer, or from the caller on an early
    /// failure); with the first error when either failed.
    private func save(
        _ value: Value,
        forKey key: String,
        expiry: CacheExpiry,
        whenOnDisk whenStored: @escaping DiskStore.Completion
    ) {
        guard disk != nil || engine.shared != nil else {
            whenStored(
                .failure(
                    .invalidConfiguration(
                        "save writes through to disk, and this cache has no disk level (maxDiskCount is 0); "
                            + "use set(_:forKey:) for a memory-only cache."
                    )
                )
            )
            return
        }
        // Both levels answer, in any order: the first failure, else success, once both have.
        let waiting = Locked(
            (remaining: (disk != nil ? 1 : 0) + (engine.shared != nil ? 1 : 0), failure: CacheError?.none)
        )
        let answer: @Sendable (Result<Void, CacheError>) -> Void = { result in
            let done = waiting.withLock { state -> Result<Void, CacheError>? in
                if case .failure(let error) = result, state.failure == nil { state.failure = error }
                state.remaining -= 1
                guard state.remaining == 0 else { return nil }
                return state.failure.map { .failure($0) } ?? .success(())
            }
            if let done { whenStored(done) }
        }
        let cached = CachedValue(value, expiresAt: expiry.expiry(storedAt: engine.clock()))
        let outcome = engine.store(
            cached,
            forKey: key,
            ifUnchangedSince: nil,
            origin: self,
            whenOnDisk: disk != nil ? answer : nil,
            whenShared: engine.shared != nil ? answer : nil
        )
        reporter.deliver(outcome, from: self)
        retireReads(of: key)
        // Only a value that was not queued at all (its serializer failed) carries a failure here.
        if let failure = outcome.storeFailure { whenStored(.failure(failure)) }
    }
}
