/// A level of a cache: something that can get, set and remove values by key, asynchronously.
///
/// Levels compose like Lego: `memory.compose(disk).compose(network)` is a level too. Every adapter in
/// `Composition/` (``compose(_:)``, `transformKeys(_:)`,
/// ``pooled()``, …) works on any level and returns a ``BasicCache``.
///
/// A miss is an error: ``get(_:)`` throws ``CacheError/notFound`` when the level holds nothing for the
/// key. Adapters that look further (``compose(_:)``, `fallback(with:)`) treat any error other than
/// `CancellationError` as a miss.
public protocol CacheLevel<Key, Value>: Sendable {
    /// The type of the keys.
    associatedtype Key: Sendable
    /// The type of the values.
    associatedtype Value: Sendable

    /// Returns the value stored for a key.
    ///
    /// - Parameter key: The key to look up.
    /// - Returns: The value.
    /// - Throws: ``CacheError/notFound`` on a miss; any other error the level meets; `CancellationError`.
    func get(_ key: Key) async throws -> Value

    /// Stores a value for a key.
    ///
    /// - Parameters:
    ///   - value: The value to store.
    ///   - key: The key to store it under.
    /// - Throws: An error when the level cannot store the value.
    func set(_ value: Value, forKey key: Key) async throws

    /// Removes the value stored for a key; removing a missing key does nothing.
    ///
    /// - Parameter key: The key to remove.
    /// - Throws: An error when the level cannot remove the value.
    func removeValue(forKey key: Key) async throws

    /// Removes every value the level holds.
    func clear() async

    /// Lets the level free what it keeps in memory; levels that keep nothing in memory ignore it.
    func onMemoryWarning()
}

/// Which of two levels ``switchLevels(_:_:switchClosure:)`` sends a key to.
///
/// Complete: there are two levels to choose from, so this enum never grows.
public enum CacheLevelSwitchResult: Sendable, Hashable {
    /// The first level.
    case cacheA
    /// The second level.
    case cacheB
}

/// A level that can answer some gets at once, without suspending: what it holds in memory.
///
/// `MemoryCacheLevel` is one, and so is a `BasicCache` made by `compose(_:)` from one. A composition
/// whose first level is synchronous serves that level's hits without an async hop, which keeps a hit
/// through `memory.compose(disk)` close to a direct memory hit. Package-wide only: users get the fast
/// path through the `compose(_:)` of those two types, and a level of their own composes as any level.
package protocol SynchronousCacheLevel<Key, Value>: CacheLevel {
    /// Returns the value for `key` if the level has it at hand, counting the access as `get` would.
    ///
    /// - Parameter key: The key to look up.
    /// - Returns: The value, or `nil` when the level cannot answer at once (which is not necessarily
    ///   a miss: ask ``CacheLevel/get(_:)``).
    func cachedValue(forKey key: Key) -> Value?
}
