// What a `SharedLevel` keeps for its cache's coherence: the invalidations it defers while the
// cache's own write of a key is queued or under way, and the bytes of its last writes, to tell their
// echoes.

import Foundation

extension SharedLevel {
    /// Sets who is told the keys whose deferred invalidation is due.
    func setInvalidationHandler(_ handler: @escaping @Sendable (String) -> Void) {
        state.withLock { $0.invalidationHandler = handler }
    }

    /// Sets what is told, outside every lock, once each write is made (or has failed: it may have
    /// landed), with its key, and once each clear is made, with `nil`: before it stops counting as
    /// outstanding, so before any save or flush that waits for it returns (even one another worker
    /// resumes, or one that begins meanwhile), so that the cache retires the reads in flight that
    /// were sent before (see `Cache.retireReads(of:)`).
    func setLandedHandler(_ handler: @escaping @Sendable (String?) -> Void) {
        state.withLock { $0.landedHandler = handler }
    }

    /// Whether this cache's own write of `key` is queued or under way; call it under the key's
    /// stripe (see ``setCompletionLock(_:)``).
    func hasOwnWriteUnderWay(of key: String) -> Bool {
        state.withLock { $0.pending[key] != nil || $0.inFlight[key] != nil }
    }

    /// Sets the lock a write's completion runs under: the key's stripe, counted as a change of the
    /// key, so that a fill whose shared read may predate the write is not installed after it.
    func setCompletionLock(_ lock: @escaping @Sendable (String, () -> Void) -> Void) {
        state.withLock { $0.completionLock = lock }
    }

    /// Whether an invalidation of `key` must wait for this cache's own write of it: when one is queued
    /// or under way, the key is noted and handed to the invalidation handler once the last such write
    /// is made, and this returns `true`.
    ///
    /// The invalidation may be the echo of that very write, which must not remove the newer local
    /// value before the server has it; once the write is made, the server holds that value or a
    /// later one, and dropping the local copy then costs one extra read at most.
    func defersInvalidation(of key: String) -> Bool {
        state.withLock { state in
            guard state.pending[key] != nil || state.inFlight[key] != nil else { return false }
            state.deferredInvalidations.insert(key)
            return true
        }
    }

    /// The most keys whose written bytes are kept for ``takeWrittenBytes(of:)``; past it they are all
    /// forgotten (each is a hint: a key without one is simply dropped on its next invalidation).
    static let writtenLimit = 4_096

    /// The bytes this cache last wrote for `key`, if no invalidation of the key came since that
    /// write was made, and forgets them: the invalidation now at hand may be that write's echo.
    ///
    /// An invalidation does not say who made the change, and a server may announce two changes of a
    /// key as one: whether the echo is this cache's own is decided by reading the key again and
    /// comparing (see `Cache.checkEcho`), never by counting.
    func takeWrittenBytes(of key: String) -> Data? {
        state.withLock { $0.written.removeValue(forKey: key) }
    }

    /// The bytes this cache last wrote for `key`, if no invalidation of the key came since that
    /// write was made, kept for that invalidation.
    func writtenBytes(of key: String) -> Data? {
        state.withLock { $0.written[key] }
    }

    /// Forgets the written bytes of `key` if they are still `bytes` (a newer own write's stay).
    func forgetWrittenBytes(of key: String, ifStill bytes: Data) {
        state.withLock { state in
            if state.written[key] == bytes { state.written[key] = nil }
        }
    }

    /// Forgets every written value kept for the echoes: when coherence is in doubt, every copy goes.
    func forgetWrittenBytes() {
        state.withLock { $0.written = [:] }
    }
}
