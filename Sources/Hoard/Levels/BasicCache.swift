/// A cache level made of closures: the type-erased level every adapter returns.
///
/// Build one from closures to wrap any source as a level, or from a level to hide its type:
/// ```swift
/// let level = BasicCache<String, Int>(get: { key in
///     guard let value = Int(key) else { throw CacheError.notFound }
///     return value
/// })
/// ```
/// `BasicCache` is a value type; copies share the closures and whatever they capture.
public struct BasicCache<Key: Sendable, Value: Sendable>: CacheLevel, Sendable {
    @usableFromInline let getValue: @Sendable (Key) async throws -> Value
    @usableFromInline let setValue: @Sendable (Value, Key) async throws -> Void
    @usableFromInline let removeValueForKey: @Sendable (Key) async throws -> Void
    @usableFromInline let clearAll: @Sendable () async -> Void
    @usableFromInline let memoryWarning: @Sendable () -> Void
    /// The synchronous answer for hits, when the level has one (see `SynchronousCacheLevel`).
    @usableFromInline let synchronousHit: (@Sendable (Key) -> Value?)?
    /// What each key is stored under, when the level maps its keys onto those of a level below (see
    /// `KeyMappingLevel`); set by the adapters that make or keep such a mapping.
    @usableFromInline var keyIdentity: (@Sendable (Key) async throws -> StoredKey?)?

    /// Creates a level from closures.
    ///
    /// Every closure but `get` defaults to doing nothing, which makes a read-only source.
    ///
    /// - Parameters:
    ///   - get: Returns the value for a key; throws ``CacheError/notFound`` on a miss.
    ///   - set: Stores a value for a key.
    ///   - removeValue: Removes the value for a key.
    ///   - clear: Removes every value.
    ///   - onMemoryWarning: Frees what the level keeps in memory.
    @inlinable
    public init(
        get: @escaping @Sendable (_ key: Key) async throws -> Value,
        set: @escaping @Sendable (_ value: Value, _ key: Key) async throws -> Void = { _, _ in },
        removeValue: @escaping @Sendable (_ key: Key) async throws -> Void = { _ in },
        clear: @escaping @Sendable () async -> Void = {},
        onMemoryWarning: @escaping @Sendable () -> Void = {}
    ) {
        self.init(
            get: get,
            set: set,
            removeValue: removeValue,
            clear: clear,
            onMemoryWarning: onMemoryWarning,
            cachedValue: nil
        )
    }

    /// Creates a level from closures, with a synchronous answer for hits.
    ///
    /// - Parameters:
    ///   - get: Returns the value for a key or throws, as ``CacheLevel/get(_:)``.
    ///   - set: Stores a value for a key.
    ///   - removeValue: Removes the value for a key.
    ///   - clear: Removes every value.
    ///   - onMemoryWarning: Frees what the level keeps in memory.
    ///   - cachedValue: Answers a get at once when it can (`nil` means "ask `get`"), as
    ///     ``cachedValue(forKey:)``; `nil` when the level never can.
    @inlinable
    public init(
        get: @escaping @Sendable (_ key: Key) async throws -> Value,
        set: @escaping @Sendable (_ value: Value, _ key: Key) async throws -> Void,
        removeValue: @escaping @Sendable (_ key: Key) async throws -> Void,
        clear: @escaping @Sendable () async -> Void,
        onMemoryWarning: @escaping @Sendable () -> Void,
        cachedValue: (@Sendable (_ key: Key) -> Value?)?
    ) {
        getValue = get
        setValue = set
        removeValueForKey = removeValue
        clearAll = clear
        memoryWarning = onMemoryWarning
        synchronousHit = cachedValue
        keyIdentity = nil
    }

    /// Wraps a level, hiding its type; a `BasicCache` is returned as it is.
    ///
    /// - Parameter level: The level to wrap.
    public init<Level: CacheLevel>(_ level: Level) where Level.Key == Key, Level.Value == Value {
        if let basic = level as? BasicCache<Key, Value> {
            self = basic
            return
        }
        self.init(
            get: { key in try await level.get(key) },
            set: { value, key in try await level.set(value, forKey: key) },
            removeValue: { key in try await level.removeValue(forKey: key) },
            clear: { await level.clear() },
            onMemoryWarning: { level.onMemoryWarning() }
        )
        keyIdentity = level.keyMapping
    }

    /// Returns the value for a key by calling the `get` closure.
    ///
    /// - Parameter key: The key to look up.
    /// - Returns: The value.
    /// - Throws: What the closure throws; ``CacheError/notFound`` on a miss.
    @inlinable
    public func get(_ key: Key) async throws -> Value {
        if let synchronousHit, let value = synchronousHit(key) { return value }
        return try await getValue(key)
    }

    /// Stores a value by calling the `set` closure.
    ///
    /// - Parameters:
    ///   - value: The value to store.
    ///   - key: The key to store it under.
    /// - Throws: What the closure throws.
    @inlinable
    public func set(_ value: Value, forKey key: Key) async throws { try await setValue(value, key) }

    /// Removes a value by calling the `removeValue` closure.
    ///
    /// - Parameter key: The key to remove.
    /// - Throws: What the closure throws.
    @inlinable
    public func removeValue(forKey key: Key) async throws { try await removeValueForKey(key) }

    /// Removes every value by calling the `clear` closure.
    @inlinable
    public func clear() async { await clearAll() }

    /// Calls the `onMemoryWarning` closure.
    @inlinable
    public func onMemoryWarning() { memoryWarning() }

    /// Returns this level as it is: it is already a `BasicCache`.
    ///
    /// - Returns: `self`.
    public func normalize() -> BasicCache<Key, Value> { self }
}

extension BasicCache: KeyMappingLevel {
    /// What each key is stored under, when the level maps its keys; `nil` when its keys are its own.
    package var mappedKeyIdentity: (@Sendable (Key) async throws -> StoredKey?)? { keyIdentity }

    /// This level, telling the adapters over it what each key is stored under (see
    /// `KeyMappingLevel`); `nil` leaves it as it is.
    ///
    /// - Parameter identity: What a key is stored under; `nil` when the level's keys are its own.
    /// - Returns: The level with that mapping.
    @usableFromInline
    package func mappingKeys(by identity: (@Sendable (Key) async throws -> StoredKey?)?) -> BasicCache {
        guard let identity else { return self }
        var level = self
        level.keyIdentity = identity
        return level
    }
}

extension BasicCache: SynchronousCacheLevel {
    /// The value for `key` if the level can answer at once; `nil` means "ask ``get(_:)``".
    ///
    /// - Parameter key: The key to look up.
    /// - Returns: The value, or `nil`.
    @inlinable
    public func cachedValue(forKey key: Key) -> Value? { synchronousHit?(key) }
}
