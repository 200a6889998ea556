import Dispatch

/// Told what a ``Cache`` does, on the main actor: for a view model or any other `@MainActor` type.
///
/// A ``CacheDelegate`` is called on whatever thread the cache is on (the background writer, the
/// caller of a set), so a `@MainActor` type cannot conform to it. Conform to this protocol instead
/// and give it to ``CacheBuilder/mainActorDelegate(_:)`` (or ``Cache/setMainActorDelegate(_:)``):
/// ```swift
/// @MainActor
/// final class FeedModel: MainActorCacheDelegate {
///     var evicted: [String] = []
///     func cache(_ cache: Cache<Post>, willEvictFromMemory value: Post, forKey key: String) {
///         evicted.append(key)
///     }
/// }
///
/// let model = FeedModel()
/// let posts = try CacheBuilder<Post>().containerName("posts").mainActorDelegate(model).build()
/// ```
/// Each notification is sent to the main actor in the order the cache made it, and arrives after
/// the call that caused it has returned (unlike a ``CacheDelegate``'s memory evictions, which arrive
/// before). The cache keeps the forwarding alive and holds the delegate weakly. A fetch failure is
/// reported, but a main-actor delegate cannot supply a fallback value: use a ``CacheDelegate`` for
/// that. Every method has a default implementation that does nothing but log, once per delegate
/// type and at level `debug`, that it ran (see ``CacheDelegate`` for why).
@MainActor
public protocol MainActorCacheDelegate<Value>: AnyObject {
    /// The type of the cache's values.
    associatedtype Value: Sendable

    /// The memory level removed `value` to make room for another entry, or because it expired.
    func cache(_ cache: Cache<Value>, willEvictFromMemory value: Value, forKey key: String)
    /// The memory level was emptied by ``Cache/clearMemory()`` or ``Cache/removeAll()``.
    func cacheWillClearMemory(_ cache: Cache<Value>)
    /// The disk level removed the entry for `key` to stay within its limits, or because it expired.
    func cache(_ cache: Cache<Value>, willEvictFromDiskForKey key: String)
    /// The disk level was emptied by ``Cache/clearDisk()`` or ``Cache/removeAll()``.
    func cacheWillClearDisk(_ cache: Cache<Value>)
    /// A value set for `key` could not be written to disk (serializer or I/O error).
    func cache(_ cache: Cache<Value>, didFailToStoreValueForKey key: String, error: any Error)
    /// Every attempt to fetch `key` failed; the callers got the error.
    func cache(_ cache: Cache<Value>, didFailToFetchForKey key: String, error: any Error)
}

extension MainActorCacheDelegate {
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
    /// Does nothing.
    public func cache(_ cache: Cache<Value>, didFailToFetchForKey key: String, error: any Error) {
        DefaultDelegateMethods.noteUse(by: self, of: "cache(_:didFailToFetchForKey:error:)")
    }
}

/// A ``CacheDelegate`` that forwards every notification to a ``MainActorCacheDelegate`` on the
/// main actor, in order.
///
/// The main dispatch queue runs its blocks in the order they were added, and the main actor runs
/// on it, so notifications arrive in the order the cache made them.
final class MainActorDelegateForwarder<Value: Sendable>: CacheDelegate {
    /// The delegate, held weakly; only read on the main actor.
    private let target: WeakMainActorReference<Value>

    init(_ target: some MainActorCacheDelegate<Value>) {
        self.target = WeakMainActorReference(target)
    }

    private func forward(_ notify: @escaping @MainActor (any MainActorCacheDelegate<Value>) -> Void) {
        let target = target
        DispatchQueue.main.async {
            MainActor.assumeIsolated {
                if let delegate = target.value { notify(delegate) }
            }
        }
    }

    func cache(_ cache: Cache<Value>, willEvictFromMemory value: Value, forKey key: String) {
        forward { $0.cache(cache, willEvictFromMemory: value, forKey: key) }
    }

    func cacheWillClearMemory(_ cache: Cache<Value>) {
        forward { $0.cacheWillClearMemory(cache) }
    }

    func cache(_ cache: Cache<Value>, willEvictFromDiskForKey key: String) {
        forward { $0.cache(cache, willEvictFromDiskForKey: key) }
    }

    func cacheWillClearDisk(_ cache: Cache<Value>) {
        forward { $0.cacheWillClearDisk(cache) }
    }

    func cache(_ cache: Cache<Value>, didFailToStoreValueForKey key: String, error: any Error) {
        forward { $0.cache(cache, didFailToStoreValueForKey: key, error: error) }
    }

    func cache(_ cache: Cache<Value>, didFailToFetchForKey key: String, error: any Error) -> Value? {
        forward { $0.cache(cache, didFailToFetchForKey: key, error: error) }
        return nil
    }
}

/// A weak reference to a main-actor delegate, sent to the main actor and only read there.
private final class WeakMainActorReference<Value: Sendable>: @unchecked Sendable {
    // Safe because `value` is written once, in `init`, and read only on the main actor.
    weak var value: (any MainActorCacheDelegate<Value>)?

    init(_ value: any MainActorCacheDelegate<Value>) {
        self.value = value
    }
}
