import Foundation

@testable import Hoard

/// A delegate that records every callback, optionally running a closure on each one.
final class RecordingDelegate<Value: Sendable>: CacheDelegate, @unchecked Sendable {
    // Safe because every stored property is guarded by `lock` (the closures are set before use).
    enum Event: Equatable {
        case memoryEviction(String)
        case diskEviction(String)
        case willClearMemory
        case willClearDisk
        case fetchFailure(String)
        case storeFailure(String)
    }

    private let lock = NSLock()
    private var recorded: [Event] = []
    private var fallbacks: [String: Value] = [:]
    private var fetchErrors: [any Error] = []
    private var storeErrors: [any Error] = []
    /// Runs inside every callback, after recording it: lets a test re-enter the cache.
    var onEvent: (@Sendable (Cache<Value>, Event) -> Void)?

    var events: [Event] { lock.withLock { recorded } }
    var memoryEvictions: [String] {
        events.compactMap { if case .memoryEviction(let key) = $0 { key } else { nil } }
    }
    var diskEvictions: [String] {
        events.compactMap { if case .diskEviction(let key) = $0 { key } else { nil } }
    }
    var lastFetchError: (any Error)? { lock.withLock { fetchErrors.last } }
    var lastStoreError: (any Error)? { lock.withLock { storeErrors.last } }

    func setFallback(_ value: Value, forKey key: String) { lock.withLock { fallbacks[key] = value } }

    private func record(_ event: Event, _ cache: Cache<Value>) {
        lock.withLock { recorded.append(event) }
        onEvent?(cache, event)
    }

    func cache(_ cache: Cache<Value>, didFailToFetchForKey key: String, error: any Error) -> Value? {
        lock.withLock { fetchErrors.append(error) }
        record(.fetchFailure(key), cache)
        return lock.withLock { fallbacks[key] }
    }

    func cache(_ cache: Cache<Value>, willEvictFromMemory value: Value, forKey key: String) {
        record(.memoryEviction(key), cache)
    }

    func cacheWillClearMemory(_ cache: Cache<Value>) { record(.willClearMemory, cache) }

    func cache(_ cache: Cache<Value>, willEvictFromDiskForKey key: String) { record(.diskEviction(key), cache) }

    func cacheWillClearDisk(_ cache: Cache<Value>) { record(.willClearDisk, cache) }

    func cache(_ cache: Cache<Value>, didFailToStoreValueForKey key: String, error: any Error) {
        lock.withLock { storeErrors.append(error) }
        record(.storeFailure(key), cache)
    }
}
