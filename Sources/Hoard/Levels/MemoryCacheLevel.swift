/// A cache level in memory, with a count limit and adaptive (W-TinyLFU), LFU or LRU eviction.
///
/// It runs on the same engine as the memory level of ``Cache``. Every operation is O(1) and never
/// suspends; the level is safe from any thread. ``onMemoryWarning()`` empties it.
///
/// ```swift
/// let memory = MemoryCacheLevel<String, Data>(capacity: 100)
/// let images = memory.compose(disk).compose(network)
/// ```
///
/// With a cost limit, every value also has a cost, given by the `cost` closure (bytes, say), and the
/// level keeps the sum of the costs within the limit:
/// ```swift
/// let thumbnails = MemoryCacheLevel<URL, Data>(capacity: 1_000, costLimit: 20 << 20, cost: { $0.count })
/// ```
public final class MemoryCacheLevel<Key: Hashable & Sendable, Value: Sendable>: CacheLevel, Sendable {
    @usableFromInline let store: MemoryStore<Key, Value>
    /// The most the costs of the stored values may add up to; `nil` for no cost limit.
    public let costLimit: Int?
    @usableFromInline let cost: (@Sendable (Value) -> Int)?

    /// Creates an empty level.
    ///
    /// ```swift
    /// let memory = MemoryCacheLevel<String, Article>()   // 100 values
    /// ```
    ///
    /// - Parameters:
    ///   - capacity: The most values kept (default 100); 0 keeps 1.
    ///   - costLimit: The most the costs of the stored values may add up to; `nil` (the default) for
    ///     a count limit only. A value whose cost alone exceeds it is not kept.
    ///   - policy: Which value to remove when a new one needs room (default
    ///     ``EvictionPolicy/wTinyLFU``, as a ``Cache``'s).
    ///   - cost: The cost of a value, for the cost limit; negative costs count as 0. Without it, every
    ///     value costs 1. Called outside the level's lock, once per set.
    /// - Precondition: `capacity` is 0 or more, and `costLimit`, when given, is 0 or more; otherwise
    ///   the program stops with a message naming the value (see "Bad arguments" in the README).
    public init(
        capacity: Int = 100,
        costLimit: Int? = nil,
        policy: EvictionPolicy = .wTinyLFU,
        cost: (@Sendable (Value) -> Int)? = nil
    ) {
        precondition(capacity >= 0, "MemoryCacheLevel capacity must be 0 or more, not \(capacity).")
        store = MemoryStore(capacity: capacity, policy: policy, sharded: costLimit == nil)
        if let costLimit {
            precondition(costLimit >= 0, "MemoryCacheLevel costLimit must be 0 or more, not \(costLimit).")
        }
        self.costLimit = costLimit
        self.cost = cost
    }

    /// The sum of the costs of the stored values (0 without a cost limit).
    public var totalCost: Int { store.totalCost }

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
        guard let costLimit else {
            store.set(value, forKey: key)
            return
        }
        setCosted(value, forKey: key, costLimit: costLimit)
    }

    @usableFromInline
    func setCosted(_ value: Value, forKey key: Key, costLimit: Int) {
        let valueCost = max(0, cost?(value) ?? 1)
        let outcome = store.set(value, forKey: key, cost: valueCost, costLimit: costLimit)
        if !outcome.isKept {
            HoardLogger.log(
                .debug,
                "Not keeping a value costing \(valueCost) in memory: the cost limit is \(costLimit)."
            )
        }
        if !outcome.evicted.isEmpty {
            HoardLogger.log(.debug, "Evicted \(outcome.evicted.count) value(s) from a memory level to fit its limits.")
        }
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

extension MemoryCacheLevel: SynchronousCacheLevel {
    /// Returns the value for `key`, counting the access, or `nil` when it is not stored.
    ///
    /// - Parameter key: The key to look up.
    /// - Returns: The value, or `nil`.
    /// - Complexity: O(1).
    @inlinable
    public func cachedValue(forKey key: Key) -> Value? { store.value(forKey: key) }
}
