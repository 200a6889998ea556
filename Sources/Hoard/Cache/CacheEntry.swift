import Foundation

/// One of a cache's storage levels.
///
/// A struct with static members rather than an enum, so that a minor release can add a level without
/// breaking a client's `switch`: compare levels with `==`, or switch with a `default` case.
public struct StorageLevel: Sendable, Hashable, CustomStringConvertible {
    @usableFromInline
    enum Kind: Sendable, Hashable {
        case memory, disk, shared
    }

    @usableFromInline let kind: Kind

    @inlinable
    init(_ kind: Kind) { self.kind = kind }

    /// The in-memory level.
    @inlinable public static var memory: StorageLevel { StorageLevel(.memory) }
    /// The on-disk level (an entry file, or a write that has not landed yet).
    @inlinable public static var disk: StorageLevel { StorageLevel(.disk) }
    /// The shared level (``CacheBuilder/sharedLevel(_:)``), such as a Redis server.
    @inlinable public static var shared: StorageLevel { StorageLevel(.shared) }

    /// `"memory"`, `"disk"` or `"shared"`.
    public var description: String {
        switch kind {
        case .memory: "memory"
        case .disk: "disk"
        case .shared: "shared"
        }
    }
}

/// A cached value with what the cache knows about it, returned by ``Cache/entry(forKey:)``.
///
/// Unlike the subscript, ``Cache/entry(forKey:)`` returns expired entries too, so that code can tell a
/// stale value (for example one served by `serveStaleOnFetchFailure`) from a fresh one.
public struct CacheEntry<Value: Sendable>: Sendable {
    /// The value.
    public var value: Value
    /// When the value expires; `nil` when it never does.
    ///
    /// For a local copy in a cache with coherence (``CacheCoherence``), the copy's own limit: the
    /// value's expiry or its storing plus `maxLocalAge`, whichever comes first. The shared level
    /// keeps the value's own expiry.
    public var expiresAt: Date?
    /// Whether the entry was expired when it was read (for a local copy with coherence, past that
    /// limit).
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
