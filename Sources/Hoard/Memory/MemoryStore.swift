/// A thread-safe, count-limited, in-memory key-value store with O(1) LFU or LRU eviction.
///
/// The engine under both ``Cache`` and the memory cache level. Every method takes one lock for a few
/// pointer updates; none calls user code, so callers report evictions after the call returns.
@usableFromInline
final class MemoryStore<Key: Hashable & Sendable, Value: Sendable>: @unchecked Sendable {
    // Safe because `index` is only read or written while holding `lock`.
    @usableFromInline let lock: Lock
    /// The primitive of `lock`, for the hot paths: locking through it costs no retain of `lock`.
    @usableFromInline let fastLock: LockHandle
    // Unchecked exclusivity: `lock` already makes every access exclusive, and the dynamic check
    // costs a runtime call on each hit.
    @usableFromInline @exclusivity(unchecked) var index: EvictionIndex<Key, Value>
    /// The most entries kept; at least 1.
    @usableFromInline let capacity: Int
    /// How many reads found their value; counted under the lock, where it costs one add.
    @usableFromInline @exclusivity(unchecked) var hits = 0
    /// Whether the owner wants to hear of hits (it has event subscribers); read under the lock with
    /// the value, so that a hit costs no second lock.
    @usableFromInline @exclusivity(unchecked) var isObserved = false

    /// Creates an empty store.
    ///
    /// - Parameters:
    ///   - capacity: The most entries kept (at least 1).
    ///   - policy: Which entry to remove when a new one needs room.
    @usableFromInline
    init(capacity: Int, policy: EvictionPolicy) {
        lock = Lock()
        fastLock = LockHandle(lock)
        self.capacity = max(1, capacity)
        self.index = EvictionIndex(policy: policy, capacity: self.capacity)
    }

    /// The eviction policy.
    var policy: EvictionPolicy { index.policy }

    /// Returns the value for `key` and counts the access, or `nil`.
    @inlinable
    func value(forKey key: Key) -> Value? {
        fastLock.lock()
        defer { fastLock.unlock() }
        let value = index.access(key)
        if value != nil { hits &+= 1 }
        return value
    }

    /// Returns the value for `key` and counts the access, with whether the owner observes hits.
    @inlinable
    func observedValue(forKey key: Key) -> (value: Value?, isObserved: Bool) {
        fastLock.lock()
        defer { fastLock.unlock() }
        let value = index.access(key)
        if value != nil { hits &+= 1 }
        return (value, isObserved)
    }

    /// Sets whether the owner observes hits (see ``observedValue(forKey:)``).
    func setObserved(_ observed: Bool) { lock.withLock { isObserved = observed } }

    /// How many reads through ``value(forKey:)`` found their value.
    var hitCount: Int { lock.withLock { hits } }

    /// Whether a value is stored for `key`; not an access.
    func contains(_ key: Key) -> Bool {
        lock.withLock { index.contains(key) }
    }

    /// Stores `value`, counting an access; returns the entry evicted to make room, if any.
    ///
    /// When the key is new and the store is full, the victim is chosen among the entries already
    /// stored, so the new value always stays.
    @inlinable
    @discardableResult
    func set(_ value: Value, forKey key: Key) -> (key: Key, value: Value)? {
        fastLock.lock()
        defer { fastLock.unlock() }
        var evicted: (key: Key, value: Value)?
        if index.count >= capacity && !index.contains(key), let victim = index.popVictim() {
            evicted = (victim.key, victim.payload)
        }
        index.upsert(value, forKey: key)
        return evicted
    }

    /// ``set(_:forKey:)``, also telling whether the owner observes (see ``observedValue(forKey:)``).
    @inlinable
    func observedSet(_ value: Value, forKey key: Key) -> (evicted: (key: Key, value: Value)?, isObserved: Bool) {
        fastLock.lock()
        defer { fastLock.unlock() }
        var evicted: (key: Key, value: Value)?
        if index.count >= capacity && !index.contains(key), let victim = index.popVictim() {
            evicted = (victim.key, victim.payload)
        }
        index.upsert(value, forKey: key)
        return (evicted, isObserved)
    }

    /// Stores `value` with a cost, evicting until both the count and `costLimit` hold.
    ///
    /// Victims are chosen among the other entries, in policy order. A value whose cost exceeds
    /// `entryCostLimit` (by default `costLimit`) is not kept, and the older value for its key is
    /// removed (it is stale).
    /// - Returns: The entries evicted, each with why (the count limit or the cost limit), the stale
    ///   value dropped when `value` is not kept, and whether `value` was kept.
    func set(
        _ value: Value,
        forKey key: Key,
        cost: Int,
        costLimit: Int,
        entryCostLimit: Int? = nil
    ) -> (evicted: [(key: Key, value: Value, reason: EvictionReason)], stale: Value?, isKept: Bool) {
        lock.withLock {
            var evicted: [(key: Key, value: Value, reason: EvictionReason)] = []
            guard cost <= min(costLimit, entryCostLimit ?? costLimit) else {
                return (evicted, index.removeValue(forKey: key), false)
            }
            let replaced = index.contains(key)
            let costBefore = index.totalCost - (replaced ? index.peekCost(key) : 0)
            var freed = 0
            while index.count - (replaced ? 1 : 0) > 0 {
                let overCount = !replaced && index.count >= capacity
                guard overCount || costBefore - freed + cost > costLimit, let victim = index.victim(excluding: key)
                else { break }
                freed += index.peekCost(victim)
                if let payload = index.removeValue(forKey: victim) {
                    evicted.append((victim, payload, overCount ? .capacity : .cost))
                }
            }
            index.upsert(value, forKey: key, cost: cost)
            return (evicted, nil, true)
        }
    }

    /// The sum of the costs of the stored values.
    var totalCost: Int { lock.withLock { index.totalCost } }

    /// Removes the value for `key`; returns it.
    @discardableResult
    func removeValue(forKey key: Key) -> Value? {
        lock.withLock { index.removeValue(forKey: key) }
    }

    /// Removes the value for `key` if `condition` holds for it; returns it.
    @discardableResult
    func removeValue(forKey key: Key, if condition: (Value) -> Bool) -> Value? {
        lock.withLock {
            guard let value = index.peek(key), condition(value) else { return nil }
            return index.removeValue(forKey: key)
        }
    }

    /// Removes every entry for which `condition` holds; returns them.
    ///
    /// - Complexity: O(n).
    func removeAll(where condition: (Key, Value) -> Bool) -> [(key: Key, value: Value)] {
        lock.withLock {
            var removed: [(key: Key, value: Value)] = []
            for entry in index.entriesInEvictionOrder where condition(entry.key, entry.payload) {
                index.removeValue(forKey: entry.key)
                removed.append((entry.key, entry.payload))
            }
            return removed
        }
    }

    /// The keys whose value satisfies `condition`, next victim first.
    ///
    /// - Complexity: O(n).
    func keys(where condition: (Value) -> Bool) -> [Key] {
        lock.withLock { index.entriesInEvictionOrder.filter { condition($0.payload) }.map(\.key) }
    }

    /// The value for `key`, without counting an access.
    func peek(_ key: Key) -> Value? { lock.withLock { index.peek(key) } }

    /// Removes every value; returns how many there were.
    @discardableResult
    func removeAll() -> Int {
        lock.withLock {
            let count = index.count
            index.removeAll()
            return count
        }
    }

    /// The number of values stored.
    var count: Int { lock.withLock { index.count } }

    /// The keys in eviction order, the next victim first.
    ///
    /// - Complexity: O(n).
    var keysInEvictionOrder: [Key] { lock.withLock { index.entriesInEvictionOrder.map(\.key) } }

    /// Checks the index's links and counts; traps on an inconsistency.
    ///
    /// For tests and debugging; nothing in the library calls it.
    func checkInvariants() { lock.withLock { index.checkInvariants() } }
}
