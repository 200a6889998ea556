/// A thread-safe, count-limited, in-memory key-value store with O(1) LFU or LRU eviction.
///
/// The engine under both ``Cache`` and the memory cache level. Every method takes one lock for a few
/// pointer updates; none calls user code, so callers report evictions after the call returns.
///
/// A large store is split into ``shardCount`` shards by a hash of the key, each with its own lock,
/// index and share of the capacity, so that threads working on different keys rarely wait for each
/// other (with one lock, two threads reading at once are slower together than one alone, since
/// every hit moves an entry). The shards share one count limit, so that a full store holds exactly
/// ``capacity`` values however the keys spread: a shard may hold more than its share while the
/// store has room (see `Room`). Once the store is full, a new key's shard evicts the victim its
/// policy names among its own entries if it holds at least its share, and otherwise the victim of
/// another shard that holds more than its share, so the shards drift back to their shares. A store
/// with fewer than ``entriesPerShardForSharding`` × 2 entries of capacity, or with a cost limit,
/// has one shard, so the policy is exact over the whole store.
///
/// Under W-TinyLFU, only the first shard sizes its window with the climber's experts; the others
/// take the share of the capacity it chose (``shareWindow(ofShard:)``). The keys spread over the
/// shards by hash, so every shard sees the same workload, and one climber's sample is as good as
/// each shard's own: the experts cost a hit its sampled requests in one shard instead of in all.
///
/// Locks: a thread holds at most one shard's lock at a time, so shards never wait for each other
/// in a cycle; it may take the lock of `room` while holding one, never the other way round.
///
/// The count limit the shards share is in `MemoryStore+Room.swift`, removals in
/// `MemoryStore+Removing.swift`, and the cost limit in `MemoryStore+CostLimit.swift`.
@usableFromInline
final class MemoryStore<Key: Hashable & Sendable, Value: Sendable>: @unchecked Sendable {
    // Safe because each shard is only read or written while holding its lock in `locks`, `room`
    // only while holding the last lock of `locks`, and `shards` itself never changes after init.

    /// One shard: an index, its counters and its share of the capacity, padded to keep shards on
    /// their own memory lines.
    @usableFromInline
    struct Shard {
        // Unchecked exclusivity is not needed: the shard is reached through a pointer, which has no
        // dynamic exclusivity check.
        @usableFromInline var index: EvictionIndex<Key, Value>
        /// How many reads found their value; counted under the lock, where it costs one add.
        @usableFromInline var hits = 0
        /// Whether the owner wants to hear of hits (it has event subscribers); read under the lock
        /// with the value, so that a hit costs no second lock.
        @usableFromInline var isObserved = false
        /// Whether the owner must hear of each eviction (it has a delegate or event subscribers);
        /// when not, ``observedSet(_:forKey:hash:)`` only counts them, in `evictions`.
        @usableFromInline var reportsEvictions = false
        /// The entries ``observedSet(_:forKey:hash:)`` evicted to make room.
        @usableFromInline var evictions = 0
        /// The shard's part of the store's capacity.
        ///
        /// The shard gives up its own entries for new keys only once it holds this many. It may hold
        /// more while the store has room.
        @usableFromInline let share: Int
        /// Whether the store was full when this shard last asked `room`, and no removal has made
        /// room since: a new key then needs a victim, and the shard does not ask again.
        @usableFromInline var isStoreFull = false
        /// Sets until the shard next shares its W-TinyLFU window through `room` (see
        /// ``shareWindow(ofShard:)``); `Int.max` when it never does.
        @usableFromInline var setsUntilWindowSync: Int
        /// Keeps the hot fields of two shards off one memory line.
        @usableFromInline var padding: (Int, Int, Int, Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0, 0, 0, 0)

        /// - Parameters:
        ///   - policy: The eviction policy.
        ///   - share: The shard's part of the store's capacity.
        ///   - leads: Whether the shard sizes its W-TinyLFU window itself; in a sharded store only
        ///     the first shard does, and the others follow it.
        ///   - syncsWindow: Whether the shard shares its window with the others.
        init(policy: EvictionPolicy, share: Int, leads: Bool, syncsWindow: Bool) {
            self.share = share
            index = EvictionIndex(policy: policy, capacity: share, runsClimber: leads)
            setsUntilWindowSync = syncsWindow ? MemoryStore.setsPerWindowSync : .max
        }
    }

    /// The capacity each shard gets at least before a store is split.
    static var entriesPerShardForSharding: Int { 8_192 }
    /// The most shards a store is split into.
    static var maximumShardCount: Int { 16 }
    /// The sets a shard of a sharded W-TinyLFU store serves between two syncs of its window.
    @usableFromInline static var setsPerWindowSync: Int { 256 }

    @usableFromInline let shards: UnsafeMutablePointer<Shard>
    /// One lock per shard, then the lock of `room`.
    @usableFromInline let locks: LockArray
    /// The room left in a sharded store; unused with one shard, which holds its whole capacity.
    @usableFromInline let room: UnsafeMutablePointer<Room>
    /// The number of shards, a power of two.
    @usableFromInline let shardCount: Int
    /// How far a mixed hash is shifted right to give a shard number.
    @usableFromInline let shardShift: UInt64
    /// The most entries kept; at least 1.
    @usableFromInline let capacity: Int
    /// The eviction policy.
    let policy: EvictionPolicy

    /// Creates an empty store.
    ///
    /// - Parameters:
    ///   - capacity: The most entries kept (at least 1).
    ///   - policy: Which entry to remove when a new one needs room.
    ///   - sharded: Whether a large store may be split into shards; a store that will be used with
    ///     a cost limit must not be.
    @usableFromInline
    init(capacity: Int, policy: EvictionPolicy, sharded: Bool = true) {
        self.capacity = max(1, capacity)
        self.policy = policy
        var shardCount = 1
        while sharded, shardCount < Self.maximumShardCount,
            self.capacity / (shardCount * 2) >= Self.entriesPerShardForSharding
        {
            shardCount *= 2
        }
        self.shardCount = shardCount
        shardShift = UInt64(64 - shardCount.trailingZeroBitCount)
        locks = LockArray(count: shardCount + 1)
        shards = .allocate(capacity: shardCount)
        for index in 0..<shardCount {
            // The remainder of the division goes to the first shards.
            let share = self.capacity / shardCount + (index < self.capacity % shardCount ? 1 : 0)
            (shards + index).initialize(
                to: Shard(
                    policy: policy,
                    share: share,
                    leads: index == 0,
                    syncsWindow: shardCount > 1 && policy == .wTinyLFU
                )
            )
        }
        room = .allocate(capacity: 1)
        room.initialize(to: Room(spare: self.capacity))
    }

    deinit {
        shards.deinitialize(count: shardCount)
        shards.deallocate()
        room.deinitialize(count: 1)
        room.deallocate()
    }

    /// The shard that holds the key whose hash value is `hash`.
    @inlinable
    func shard(for hash: Int) -> Int {
        if shardCount == 1 { return 0 }
        // The high bits of a multiplicative mix: independent of the low bits the index's table uses.
        let mixed = UInt64(UInt(bitPattern: hash)) &* 0x9E37_79B9_7F4A_7C15
        return Int(truncatingIfNeeded: mixed >> shardShift)
    }

    /// Runs `body` on shard number `index`, holding its lock.
    @inlinable
    func withShard<Result>(_ index: Int, _ body: (inout Shard) throws -> Result) rethrows -> Result {
        locks.lock(index)
        defer { locks.unlock(index) }
        return try body(&shards[index])
    }

    /// Runs `body` on every shard in turn, each under its lock, and collects the results.
    func forEachShard<Result>(_ body: (inout Shard) -> Result) -> [Result] {
        (0..<shardCount).map { withShard($0, body) }
    }

    /// Returns the value for `key` and counts the access, or `nil`.
    @inlinable
    func value(forKey key: Key) -> Value? {
        valueAndObservation(forKey: key).value
    }

    /// Returns the value for `key` and counts the access, with whether the owner observes hits.
    @inlinable
    func valueAndObservation(forKey key: Key) -> (value: Value?, isObserved: Bool) {
        let hash = key.hashValue
        let index = shard(for: hash)
        locks.lock(index)
        defer { locks.unlock(index) }
        // The default policy's hit goes straight to its own path: through `access`, which the
        // optimizer leaves a call for its size, it cost a W-TinyLFU hit a call more.
        let value =
            shards[index].index.policy == .wTinyLFU
            ? shards[index].index.admissionAccess(key, hash: hash) : shards[index].index.access(key, hash: hash)
        if value != nil { shards[index].hits &+= 1 }
        return (value, shards[index].isObserved)
    }

    /// Takes back the hit that ``valueAndObservation(forKey:)`` counted for `key`: the owner found the
    /// value expired, so the read was a miss.
    func uncountHit(forKey key: Key) {
        withShard(shard(for: key.hashValue)) { $0.hits &-= 1 }
    }

    /// Sets whether the owner observes hits (see ``valueAndObservation(forKey:)``).
    func setObserved(_ observed: Bool) { _ = forEachShard { $0.isObserved = observed } }

    /// Sets whether the owner hears of each eviction (see `Shard.reportsEvictions`).
    func setReportsEvictions(_ reports: Bool) { _ = forEachShard { $0.reportsEvictions = reports } }

    /// How many entries ``observedSet(_:forKey:hash:)`` evicted to make room.
    var evictionCount: Int { forEachShard(\.evictions).reduce(0, +) }

    /// How many reads through ``value(forKey:)`` found their value.
    var hitCount: Int { forEachShard(\.hits).reduce(0, +) }

    /// Whether a value is stored for `key`; not an access.
    func contains(_ key: Key) -> Bool {
        let hash = key.hashValue
        return withShard(shard(for: hash)) { $0.index.contains(key, hash: hash) }
    }

    /// Stores `value`, counting an access; returns the entry evicted to make room, if any.
    ///
    /// When the key is new and its shard is full, the victim is chosen among the entries already
    /// stored, so the new value always stays.
    @inlinable
    @discardableResult
    func set(_ value: Value, forKey key: Key) -> (key: Key, value: Value)? {
        observedSet(value, forKey: key).evicted
    }

    /// ``set(_:forKey:)``, also telling whether the owner observes (see ``valueAndObservation(forKey:)``).
    @inlinable
    func observedSet(_ value: Value, forKey key: Key) -> (evicted: (key: Key, value: Value)?, isObserved: Bool) {
        insert(value, forKey: key, hash: key.hashValue, returningEviction: true)
    }

    /// ``observedSet(_:forKey:)`` for a key whose hash value (`key.hashValue`) the caller has already.
    ///
    /// Counts an eviction in the shard, and returns it only when the owner hears of each one.
    @inlinable
    func observedSet(
        _ value: Value,
        forKey key: Key,
        hash: Int
    ) -> (evicted: (key: Key, value: Value)?, isObserved: Bool) {
        insert(value, forKey: key, hash: hash, returningEviction: false)
    }

    /// Stores `value` in its shard, evicting a victim when the store is full and the key is new.
    ///
    /// A shard that holds less than its share stores the value first and, if the store was full,
    /// evicts from another shard afterwards (``evictElsewhere(for:storedIn:returningEviction:)``),
    /// holding one shard lock at a time. One that holds at least its share evicts its own victim
    /// first, as a store of one shard does.
    ///
    /// With `returningEviction`, returns the eviction for the caller to count; without, counts it in
    /// the victim's shard and returns it only when the owner hears of each one.
    @inlinable
    func insert(
        _ value: Value,
        forKey key: Key,
        hash: Int,
        returningEviction: Bool
    ) -> (evicted: (key: Key, value: Value)?, isObserved: Bool) {
        let index = shard(for: hash)
        locks.lock(index)
        var evicted: (key: Key, value: Value)?
        var needsVictimElsewhere = false
        if shards[index].index.count < shards[index].share {
            // Below its share, a shard gives up none of its own entries for a new key.
            if shards[index].index.upsert(value, forKey: key, hash: hash) == nil && shardCount > 1 {
                needsVictimElsewhere = !claimRoom(inShard: index)
            }
        } else if let slot = Self.slot(of: key, hash: hash, in: &shards[index]) {
            shards[index].index.update(slot, with: value, hash: hash)
        } else if shardCount > 1 && claimRoom(inShard: index) {
            shards[index].index.insert(newKey: key, hash: hash, payload: value)
        } else if let victim = shards[index].index.replaceVictim(withNewKey: key, hash: hash, payload: value) {
            // The new entry takes the victim's slot: one lookup, and no entry moves.
            evicted = Self.record(victim, in: &shards[index], returningEviction: returningEviction).reported
        }
        let isObserved = shards[index].isObserved
        shards[index].setsUntilWindowSync &-= 1
        if shards[index].setsUntilWindowSync == 0 { shareWindow(ofShard: index) }
        locks.unlock(index)
        if needsVictimElsewhere {
            evicted = evictElsewhere(for: key, storedIn: index, returningEviction: returningEviction)
        }
        return (evicted, isObserved)
    }

    /// The slot of `key` in `shard`'s index, or `nil` when the shard does not hold it.
    ///
    /// Takes the shard `inout` so that the index is read where it is: a non-mutating call on
    /// `shards[index].index` copies the whole index first (retaining every buffer it holds, then
    /// releasing them), as the pointee of an unsafe pointer may change during the call.
    @inlinable
    static func slot(of key: Key, hash: Int, in shard: inout Shard) -> Int32? {
        shard.index.slot(for: key, hash: hash)
    }

    /// The keys whose value satisfies `condition`, each shard's next victim first.
    ///
    /// - Complexity: O(n).
    func keys(where condition: (Value) -> Bool) -> [Key] {
        forEachShard { $0.index.entriesInEvictionOrder.filter { condition($0.payload) }.map(\.key) }.flatMap { $0 }
    }

    /// The value for `key`, without counting an access.
    func peek(_ key: Key) -> Value? {
        let hash = key.hashValue
        return withShard(shard(for: hash)) { $0.index.peek(key, hash: hash) }
    }

    /// The number of values stored.
    var count: Int { forEachShard(\.index.count).reduce(0, +) }

    /// The keys in eviction order, the next victim first (shard after shard when sharded).
    ///
    /// - Complexity: O(n).
    var keysInEvictionOrder: [Key] { forEachShard { $0.index.entriesInEvictionOrder.map(\.key) }.flatMap { $0 } }
}
