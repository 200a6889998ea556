import Foundation

/// One of a cache's storage levels.
///
/// New cases may be added in a minor release: a `switch` over it needs an `@unknown default` case.
public enum StorageLevel: String, Sendable, Hashable, CaseIterable {
    /// The in-memory level.
    case memory
    /// The on-disk level (an entry file, or a write that has not landed yet).
    case disk
    /// The shared level (``CacheBuilder/sharedLevel(_:)``), such as a Redis server.
    case shared
}

/// A cached value with what the cache knows about it, returned by ``Cache/entry(forKey:)``.
///
/// Unlike the subscript, ``Cache/entry(forKey:)`` returns expired entries too, so that code can tell a
/// stale value (for example one served by `serveStaleOnFetchFailure`) from a fresh one.
public struct CacheEntry<Value: Sendable>: Sendable {
    /// The value.
    public var value: Value
    /// When the value expires; `nil` when it never does.
    public var expiresAt: Date?
    /// Whether the entry was expired when it was read.
    public var isExpired: Bool
    /// The level that holds it.
    public var level: StorageLevel

    /// Creates an entry.
    public init(value: Value, expiresAt: Date?, isExpired: Bool, level: StorageLevel) {
        self.value = value
        self.expiresAt = expiresAt
        self.isExpired = isExpired
        self.level = level
    }
}

extension CacheEntry: Equatable where Value: Equatable {}
