import Foundation

/// Why a level removed an entry on its own.
///
/// A struct with static members rather than an enum, so that a minor release can add a reason without
/// breaking a client's `switch`: compare reasons with `==`, or switch with a `default` case.
public struct EvictionReason: Sendable, Hashable, CustomStringConvertible {
    /// The reasons this version knows; the raw value indexes per-reason counters.
    @usableFromInline
    enum Kind: Int, Sendable, CaseIterable {
        case capacity, cost, expired, memoryPressure
    }

    @usableFromInline let kind: Kind

    @inlinable
    init(_ kind: Kind) { self.kind = kind }

    /// The level was at its count limit (`maxRamCount`, `maxDiskCount`).
    @inlinable public static var capacity: EvictionReason { EvictionReason(.capacity) }
    /// The level was at its cost or byte limit (`maxRamCost`, `maxDiskBytes`), or the value alone is
    /// too large for it.
    @inlinable public static var cost: EvictionReason { EvictionReason(.cost) }
    /// The entry was expired (see ``CacheExpiry``).
    @inlinable public static var expired: EvictionReason { EvictionReason(.expired) }
    /// The system ran short of memory (``Cache/onMemoryWarning()``).
    @inlinable public static var memoryPressure: EvictionReason { EvictionReason(.memoryPressure) }

    /// Every reason this version knows.
    static var allCases: [EvictionReason] { Kind.allCases.map(EvictionReason.init) }

    /// The reason's position in `allCases`.
    var index: Int { kind.rawValue }

    /// `"capacity"`, `"cost"`, `"expired"` or `"memoryPressure"`.
    public var description: String {
        switch kind {
        case .capacity: "capacity"
        case .cost: "cost"
        case .expired: "expired"
        case .memoryPressure: "memoryPressure"
        }
    }
}

/// Something a cache did, delivered to every subscriber of ``Cache/events``.
///
/// Events from one thread arrive in the order they happened; events from different threads may
/// interleave. An event is a ``kind`` and the details that kind carries; the others are `nil`:
/// ```swift
/// for await event in cache.events where event.kind == .evicted {
///     print(event.key ?? "", event.reason ?? .capacity)
/// }
/// ```
/// A struct rather than an enum, so that a minor release can add a kind of event without breaking a
/// client's `switch`: test ``kind`` with `==`, or switch over it with a `default` case. Events compare
/// equal to the values the static constructors make (`event == .miss(key: "a")`).
public struct CacheEvent<Value: Sendable>: Sendable {
    /// What happened; a struct with static members, so that new kinds can be added.
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        /// The name of the kind, as its static member is spelled.
        public let description: String

        private init(_ description: String) { self.description = description }

        /// A value was stored (by a set or by a fetch): ``CacheEvent/key`` and ``CacheEvent/value``.
        public static var set: Kind { Kind("set") }
        /// A read found a live value: ``CacheEvent/key`` and ``CacheEvent/level``.
        public static var hit: Kind { Kind("hit") }
        /// A read found no live value in any level: ``CacheEvent/key``.
        public static var miss: Kind { Kind("miss") }
        /// A level removed an entry on its own: ``CacheEvent/key``, ``CacheEvent/level`` and
        /// ``CacheEvent/reason``.
        public static var evicted: Kind { Kind("evicted") }
        /// A fetch failed and the expired value was returned instead (`serveStaleOnFetchFailure`):
        /// ``CacheEvent/key``, ``CacheEvent/value`` and ``CacheEvent/expiredAt``.
        public static var servedStale: Kind { Kind("servedStale") }
        /// A value was removed by ``Cache/removeValue(forKey:)``: ``CacheEvent/key``.
        public static var removed: Kind { Kind("removed") }
        /// A read of the shared level found nothing usable: ``CacheEvent/key``.
        public static var sharedMiss: Kind { Kind("sharedMiss") }
        /// The shared level failed to read or write a key (a server down, a timeout); a read was
        /// served as a miss: ``CacheEvent/key`` and ``CacheEvent/error``.
        public static var sharedFailure: Kind { Kind("sharedFailure") }
        /// A level was emptied (``Cache/clearMemory()``, ``Cache/clearDisk()``,
        /// ``Cache/removeAll()``): ``CacheEvent/level``.
        public static var cleared: Kind { Kind("cleared") }
    }

    /// What happened.
    public var kind: Kind
    /// The key the event is about; `nil` for ``Kind/cleared``.
    public var key: String?
    /// The value stored (``Kind/set``) or served (``Kind/servedStale``).
    public var value: Value?
    /// The level that served, evicted or was cleared (``Kind/hit``, ``Kind/evicted``,
    /// ``Kind/cleared``).
    public var level: StorageLevel?
    /// Why the entry was evicted (``Kind/evicted``).
    public var reason: EvictionReason?
    /// When the value served stale had expired (``Kind/servedStale``).
    public var expiredAt: Date?
    /// What the shared level failed with (``Kind/sharedFailure``).
    public var error: CacheError?

    /// Creates an event; the static constructors below make each kind with its details.
    public init(
        kind: Kind,
        key: String?,
        value: Value? = nil,
        level: StorageLevel? = nil,
        reason: EvictionReason? = nil,
        expiredAt: Date? = nil,
        error: CacheError? = nil
    ) {
        self.kind = kind
        self.key = key
        self.value = value
        self.level = level
        self.reason = reason
        self.expiredAt = expiredAt
        self.error = error
    }

    /// A value was stored.
    public static func set(key: String, value: Value) -> Self { Self(kind: .set, key: key, value: value) }
    /// A read found a live value in `level`.
    public static func hit(key: String, level: StorageLevel) -> Self { Self(kind: .hit, key: key, level: level) }
    /// A read found no live value.
    public static func miss(key: String) -> Self { Self(kind: .miss, key: key) }
    /// `level` removed an entry on its own.
    public static func evicted(key: String, level: StorageLevel, reason: EvictionReason) -> Self {
        Self(kind: .evicted, key: key, level: level, reason: reason)
    }
    /// A fetch failed and the expired value was returned instead.
    public static func servedStale(key: String, value: Value, expiredAt: Date) -> Self {
        Self(kind: .servedStale, key: key, value: value, expiredAt: expiredAt)
    }
    /// A value was removed by ``Cache/removeValue(forKey:)``.
    public static func removed(key: String) -> Self { Self(kind: .removed, key: key) }
    /// A read of the shared level found nothing usable.
    public static func sharedMiss(key: String) -> Self { Self(kind: .sharedMiss, key: key) }
    /// The shared level failed to read or write `key`.
    public static func sharedFailure(key: String, error: CacheError) -> Self {
        Self(kind: .sharedFailure, key: key, error: error)
    }
    /// `level` was emptied.
    public static func cleared(_ level: StorageLevel) -> Self { Self(kind: .cleared, key: nil, level: level) }
}

extension CacheEvent: Equatable where Value: Equatable {}
