#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// The in-memory baselines written for the benchmark: a lock of the kind Hoard uses, and a plain
// O(1) LRU cache behind one such lock, the bar Hoard's memory level must not fall below.

/// A mutual-exclusion lock: `pthread_mutex_t` (`os_unfair_lock` on Apple platforms), in its own
/// allocation so that its address never moves; the same primitive as Hoard's own lock, so that a
/// comparison with Hoard measures data structures, not locks.
final class PlainLock: @unchecked Sendable {
    // Safe because the only stored state is the primitive, which is made to be shared.
    #if canImport(Darwin)
    private let primitive: UnsafeMutablePointer<os_unfair_lock>
    #else
    private let primitive: UnsafeMutablePointer<pthread_mutex_t>
    #endif

    init() {
        primitive = .allocate(capacity: 1)
        #if canImport(Darwin)
        primitive.initialize(to: os_unfair_lock())
        #else
        primitive.initialize(to: pthread_mutex_t())
        pthread_mutex_init(primitive, nil)
        #endif
    }

    deinit {
        #if !canImport(Darwin)
        pthread_mutex_destroy(primitive)
        #endif
        primitive.deinitialize(count: 1)
        primitive.deallocate()
    }

    @inline(__always)
    func lock() {
        #if canImport(Darwin)
        os_unfair_lock_lock(primitive)
        #else
        pthread_mutex_lock(primitive)
        #endif
    }

    @inline(__always)
    func unlock() {
        #if canImport(Darwin)
        os_unfair_lock_unlock(primitive)
        #else
        pthread_mutex_unlock(primitive)
        #endif
    }
}

/// A plain, count-limited LRU cache behind one lock: a dictionary from key to slot, and a doubly
/// linked list through a fixed array of nodes, least recently used at the head.
///
/// Written to be fast, as the bar Hoard's memory level must reach: the nodes live in one allocation
/// made up front (no growth, no copy-on-write checks), a get is one hash lookup, a set of a new key
/// into a full cache is two (the new key claims the victim's slot in the same lookup that finds it
/// absent; then the victim's key is removed). No statistics, no callbacks.
final class PlainLRU<Key: Hashable, Value>: @unchecked Sendable {
    // Safe because every stored property but `capacity` is read and written only while holding `lock`.
    private struct Node {
        var key: Key
        var value: Value
        var prev: Int32
        var next: Int32
    }

    let capacity: Int
    private let lock = PlainLock()
    private var slots: [Key: Int32]
    private let nodes: UnsafeMutablePointer<Node>
    private var count = 0
    /// The least recently used node, the next victim.
    private var head: Int32 = -1
    /// The most recently used node.
    private var tail: Int32 = -1

    /// - Parameters:
    ///   - capacity: The most entries kept.
    ///   - tableCapacity: The number of keys the hash table is sized for; more than `capacity`
    ///     lowers its load factor (an experiment: shorter probe runs to rehash on each removal).
    init(capacity: Int, tableCapacity: Int? = nil) {
        self.capacity = max(1, capacity)
        // One more than the capacity: a new key is inserted before the victim's key is removed.
        slots = Dictionary(minimumCapacity: max(self.capacity + 1, tableCapacity ?? 0))
        nodes = .allocate(capacity: self.capacity)
    }

    deinit {
        nodes.deinitialize(count: count)
        nodes.deallocate()
    }

    /// The number of entries.
    var entryCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return count
    }

    /// The value for `key`, made the most recently used; or `nil`.
    func value(forKey key: Key) -> Value? {
        lock.lock()
        defer { lock.unlock() }
        guard let slot = slots[key] else { return nil }
        moveToTail(slot)
        return nodes[Int(slot)].value
    }

    /// Stores `value` as the most recently used entry; returns whether an entry was evicted.
    @discardableResult
    func set(_ value: Value, forKey key: Key) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        // The slot a new key takes: the next free one, or the victim's when the cache is full.
        let candidate = count < capacity ? Int32(count) : head
        let (slot, isNew) = Self.claim(&slots[key, default: -1], candidate: candidate)
        guard isNew else {
            nodes[Int(slot)].value = value
            moveToTail(slot)
            return false
        }
        if count < capacity {
            (nodes + Int(slot)).initialize(to: Node(key: key, value: value, prev: -1, next: -1))
            count += 1
            append(slot)
            return false
        }
        // Full: `slot` is the head, the least recently used entry; it becomes the new key's.
        unlink(slot)
        slots.removeValue(forKey: nodes[Int(slot)].key)
        nodes[Int(slot)].key = key
        nodes[Int(slot)].value = value
        append(slot)
        return true
    }

    /// ``set(_:forKey:)`` with the hash-table traffic of Hoard's `MemoryStore.set` when it evicts (an
    /// experiment, to price Hoard's extra lookups): a lookup to see whether the key is stored, the
    /// victim's removal, a re-index of the node that fills the victim's slot, a lookup of the new key
    /// and its insertion, where ``set(_:forKey:)`` makes two.
    @discardableResult
    func setWithHoardLookups(_ value: Value, forKey key: Key) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        var evicted = false
        var free = Int32(count)
        if count >= capacity && slots[key] == nil {
            free = head
            unlink(free)
            slots.removeValue(forKey: nodes[Int(free)].key)
            // Hoard moves its last node into the freed slot and re-indexes that node's key.
            if tail >= 0 { slots[nodes[Int(tail)].key] = tail }
            evicted = true
        }
        if let slot = slots[key] {
            nodes[Int(slot)].value = value
            moveToTail(slot)
            return false
        }
        slots[key] = free
        if evicted {
            nodes[Int(free)].key = key
            nodes[Int(free)].value = value
        } else {
            (nodes + Int(free)).initialize(to: Node(key: key, value: value, prev: -1, next: -1))
            count += 1
        }
        append(free)
        return evicted
    }

    /// Finds the key's slot or, when it has none (-1), gives it `candidate`; one hash lookup.
    @inline(__always)
    private static func claim(_ slot: inout Int32, candidate: Int32) -> (slot: Int32, isNew: Bool) {
        if slot >= 0 { return (slot, false) }
        slot = candidate
        return (candidate, true)
    }

    @inline(__always)
    private func moveToTail(_ slot: Int32) {
        guard slot != tail else { return }
        unlink(slot)
        append(slot)
    }

    @inline(__always)
    private func unlink(_ slot: Int32) {
        let prev = nodes[Int(slot)].prev
        let next = nodes[Int(slot)].next
        if prev >= 0 { nodes[Int(prev)].next = next } else { head = next }
        if next >= 0 { nodes[Int(next)].prev = prev } else { tail = prev }
    }

    @inline(__always)
    private func append(_ slot: Int32) {
        nodes[Int(slot)].prev = tail
        nodes[Int(slot)].next = -1
        if tail >= 0 { nodes[Int(tail)].next = slot } else { head = slot }
        tail = slot
    }
}

/// The plain LRU split into independent shards, each behind its own lock, chosen by the key's hash:
/// an experiment showing what sharding buys a single-lock cache on two threads (each shard is LRU
/// on its own, so the whole is only approximately LRU).
final class ShardedLRU<Key: Hashable, Value>: Sendable {
    private let shards: [PlainLRU<Key, Value>]

    /// - Parameters:
    ///   - capacity: The most entries kept in all, split evenly between the shards.
    ///   - shardCount: A power of two.
    init(capacity: Int, shardCount: Int) {
        precondition(shardCount > 0 && shardCount & (shardCount - 1) == 0, "shardCount must be a power of two")
        let perShard = (capacity + shardCount - 1) / shardCount
        shards = (0..<shardCount).map { _ in PlainLRU(capacity: perShard) }
    }

    /// The key's shard, unretained: `shards` keeps every shard alive, and retaining one on each call
    /// would make two threads fight over its reference count.
    @inline(__always)
    private func shard(_ key: Key) -> Unmanaged<PlainLRU<Key, Value>> {
        // The high bits, so that the shard's own table (which uses the low bits) stays evenly filled.
        .passUnretained(shards[Int(UInt(bitPattern: key.hashValue) >> 58) & (shards.count - 1)])
    }

    func value(forKey key: Key) -> Value? {
        shard(key)._withUnsafeGuaranteedRef { $0.value(forKey: key) }
    }

    @discardableResult
    func set(_ value: Value, forKey key: Key) -> Bool {
        shard(key)._withUnsafeGuaranteedRef { $0.set(value, forKey: key) }
    }
}
