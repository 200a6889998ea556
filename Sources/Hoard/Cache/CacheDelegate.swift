/// Told what a ``Cache`` does: evictions, clears, failed fetches and failed writes.
///
/// Every method has a default implementation that does nothing (or returns `nil`), so implement only
/// what you need. The cache holds its delegate weakly.
///
/// Because of those defaults, a method whose name differs from a requirement's (a guessed
/// `cache(_:willEvictFromDisk:forKey:)`) compiles and is never called. Two ways to notice:
/// - Write the methods in an extension that declares the conformance (`extension MyLog:
///   CacheDelegate { … }`): the compiler then warns about a method that nearly matches a
///   requirement.
/// - Set ``HoardLogger/output``: the first time a default implementation runs for a delegate type,
///   it logs, at level `debug`, which requirement that type left to the default.
///
/// Callbacks are made outside the cache's locks, so a delegate may call back into the cache. Memory
/// evictions and the clear callbacks arrive on the thread of the call that caused them, before that
/// call returns. Disk evictions and failed writes arrive on the cache's background writer. A fetch
/// failure arrives on the task that ran the fetch.
public protocol CacheDelegate<Value>: AnyObject, Sendable {
    /// The type of the cache's values.
    associatedtype Value: Sendable

    /// Every attempt to fetch `key` failed; return a value to give the caller instead of the error.
    ///
    /// A fallback is returned to every caller waiting on that fetch but not stored.
    ///
    /// - Parameters:
    ///   - cache: The cache whose fetch failed.
    ///   - key: The key that could not be fetched.
    ///   - error: A ``CacheError`` with code `fetchFailed`, carrying the attempts and the last fetch error.
    /// - Returns: A fallback value, or `nil` to let the callers get the error.
    func cache(_ cache: Cache<Value>, didFailToFetchForKey key: String, error: any Error) -> Value?

    /// The memory level removed `value` to make room for another entry (or under memory pressure).
    ///
    /// Despite the name, which the API keeps from its first version, the call comes *after* the
    /// eviction: the entry is already out of memory (a read of `key` from here finds the disk copy,
    /// if there is one), and the call that caused it has not returned yet. A read made from this
    /// callback is not copied back into memory, which would evict another entry and call this again.
    func cache(_ cache: Cache<Value>, willEvictFromMemory value: Value, forKey key: String)

    /// The memory level is about to be emptied by ``Cache/clearMemory()`` or ``Cache/removeAll()``.
    func cacheWillClearMemory(_ cache: Cache<Value>)

    /// The disk level removes the entry for `key` to stay within its count limit.
    ///
    /// Called on the background writer, right after the entry stopped being readable; it goes to the
    /// cache whose write made room necessary. It may call the cache, but not the forms that wait
    /// for the writer (``Cache/flushAndWait()``, ``Cache/saveAndWait(_:forKey:)``): the writer would
    /// wait for itself.
    func cache(_ cache: Cache<Value>, willEvictFromDiskForKey key: String)

    /// The disk level is about to be emptied by ``Cache/clearDisk()`` or ``Cache/removeAll()``.
    func cacheWillClearDisk(_ cache: Cache<Value>)

    /// A value set for `key` could not be written to disk (serializer or I/O error); it stays in
    /// memory only, and an older value on disk was removed.
    ///
    /// Called on the background writer (or on the caller's thread when a cost limit serialized the
    /// value there); like ``cache(_:willEvictFromDiskForKey:)``, it must not wait for the writer.
    func cache(_ cache: Cache<Value>, didFailToStoreValueForKey key: String, error: any Error)
}

extension CacheDelegate {
    /// Returns `nil`: callers get the fetch error.
    public func cache(_ cache: Cache<Value>, didFailToFetchForKey key: String, error: any Error) -> Value? {
        DefaultDelegateMethods.noteUse(by: self, of: "cache(_:didFailToFetchForKey:error:)")
        return nil
    }
    /// Does nothing.
    public func cache(_ cache: Cache<Value>, willEvictFromMemory value: Value, forKey key: String) {
        DefaultDelegateMethods.noteUse(by: self, of: "cache(_:willEvictFromMemory:forKey:)")
    }
    /// Does nothing.
    public func cacheWillClearMemory(_ cache: Cache<Value>) {
        DefaultDelegateMethods.noteUse(by: self, of: "cacheWillClearMemory(_:)")
    }
    /// Does nothing.
    public func cache(_ cache: Cache<Value>, willEvictFromDiskForKey key: String) {
        DefaultDelegateMethods.noteUse(by: self, of: "cache(_:willEvictFromDiskForKey:)")
    }
    /// Does nothing.
    public func cacheWillClearDisk(_ cache: Cache<Value>) {
        DefaultDelegateMethods.noteUse(by: self, of: "cacheWillClearDisk(_:)")
    }
    /// Does nothing.
    public func cache(_ cache: Cache<Value>, didFailToStoreValueForKey key: String, error: any Error) {
        DefaultDelegateMethods.noteUse(by: self, of: "cache(_:didFailToStoreValueForKey:error:)")
    }
}

/// Logs, once per delegate type and method, that a delegate left a callback to its default
/// implementation: the way to notice a method whose name misses the requirement's, which compiles
/// as an unrelated method and is never called.
enum DefaultDelegateMethods {
    /// The delegate types and methods already logged, as "type method".
    private static let logged = Locked(Set<String>())

    /// Logs at level `debug`, the first time for this delegate's type and this method, that the
    /// default implementation of `method` ran; does nothing while no one listens to the logger.
    static func noteUse(by delegate: AnyObject, of method: String) {
        guard HoardLogger.output != nil else { return }
        let type = String(reflecting: Swift.type(of: delegate))
        guard logged.withLock({ $0.insert("\(type) \(method)").inserted }) else { return }
        HoardLogger.log(
            .debug,
            "delegate \(type) does not implement \(method): the default implementation ran, which does nothing"
        )
    }
}
