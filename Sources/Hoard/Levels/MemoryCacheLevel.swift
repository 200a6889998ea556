/// A cache level in memory, with a count limit and LFU or LRU eviction.
///
/// It runs on the same engine as the memory level of ``Cache``. Every operation is O(1) and never
/// suspends; the level is safe from any thread. ``onMemoryWarning()`` empties it.
///
/// ```swift
/// let memory = MemoryCacheLevel<String, Data>(capacity: 100)
/// let images = memory.compose(disk).compose(network)
/// ```
/// The cost-limited form of the contract (`costLimit:` with a cost closure) is not available yet.
public final class MemoryCacheLevel<Key: Hashable & Sendable, Value: Sendable>: CacheLevel, Sendable {
    @usableFromInline let store: MemoryStore<Key, Value>

    /// Creates an empty level.
    ///
    /// - Parameters:
    ///   - capacity: The most values kept; values below 1 keep 1.
    ///   - policy: Which value to remove when a new one needs room.
    public init(capacity: Int, policy: EvictionPolicy = .lfu) {
        store = MemoryStore(capacity: capacity, policy: policy)
    }

    /// The number of values stored.
    public var count: Int { store.count }

    /// The most values kept.
    public var capacity: Int { store.capacity }

    /// Returns the value for a key, counting the access for eviction.
    ///
    /// - Parameter key: The key to look up.
    /// - Returns: The value.
    /// - Throws: ``CacheError/notFound`` when no value is stored for `key`.
    /// - Complexity: O(1).
    @inlinable
    public func get(_ key: Key) async throws -> Value {
        guard let value = store.value(forKey: key) else { throw Self.miss(key) }
        return value
    }

    @usableFromInline
    static func miss(_ key: Key) -> CacheError {
        CacheError.notFound(key: String(describing: key))
    }

    /// Stores a value, evicting another one when the level is full.
    ///
    /// - Parameters:
    ///   - value: The value to store.
    ///   - key: The key to store it under.
    /// - Throws: Never.
    /// - Complexity: O(1).
    @inlinable
    public func set(_ value: Value, forKey key: Key) async throws {
        store.set(value, forKey: key)
    }

    /// Removes the value for a key.
    ///
    /// - Parameter key: The key to remove.
    /// - Throws: Never.
    /// - Complexity: O(1).
    public func removeValue(forKey key: Key) async throws {
        store.removeValue(forKey: key)
    }

    /// Removes every value.
    ///
    /// - Complexity: O(n).
    public func clear() async {
        store.removeAll()
    }

    /// Removes every value, freeing the memory they use.
    ///
    /// - Complexity: O(n).
    public func onMemoryWarning() {
        store.removeAll()
    }
}
