// The count limit that the shards of a `MemoryStore` share: how a sharded store holds exactly its
// capacity however the keys spread.
//
// `room.spare` is the capacity minus the entries of every shard. A shard takes one from it for each
// new key; once it is 0 the store is full, and the shard remembers so (`Shard.isStoreFull`) instead of
// asking again for each new key, so a full store's evicting sets take no lock but their shard's. A
// removal gives the room back and, if some shard may have remembered the store full, tells every
// shard that it is not. Every change of a shard's entries keeps `spare + Σ count == capacity` once
// it is over; while a set evicts from another shard, the store holds one value more for a moment.

extension MemoryStore {
    /// The room left in a sharded store, which its shards share.
    @usableFromInline
    struct Room {
        /// How many more values the store may hold: ``capacity`` minus the entries of every shard.
        @usableFromInline var spare: Int
        /// Whether a shard found `spare` at 0 and set its `isStoreFull` since the last removal: the
        /// next removal must then clear every shard's `isStoreFull`.
        @usableFromInline var isFull = false
        /// The W-TinyLFU window that the first shard's climber chose, for the other shards.
        @usableFromInline var window: (share: Double, admitsAll: Bool)?

        @usableFromInline
        init(spare: Int) { self.spare = spare }
    }

    /// Shares the W-TinyLFU window of shard `index`, whose lock the caller holds: the first shard,
    /// which runs the climber, publishes its window in `room`; another takes the one published.
    ///
    /// Every ``setsPerWindowSync`` sets of a shard; the climber decides at most once per 256 sampled
    /// requests of the first shard, so its decisions reach the others within a few hundred sets.
    @usableFromInline
    func shareWindow(ofShard index: Int) {
        shards[index].setsUntilWindowSync = Self.setsPerWindowSync
        locks.lock(roomLock)
        defer { locks.unlock(roomLock) }
        if index == 0 {
            room.pointee.window = shards[0].index.admission.window
        } else if let window = room.pointee.window, window != shards[index].index.admission.window {
            shards[index].index.admission.adoptWindow(share: window.share, admitsAll: window.admitsAll)
        }
    }

    /// What a removal of victims found: whether it removed one, and the entry when the caller must
    /// hear of it.
    @usableFromInline
    typealias Eviction = (isDone: Bool, reported: (key: Key, value: Value)?)

    /// The number of the lock that guards `room`.
    @inlinable
    var roomLock: Int { shardCount }

    /// Counts a victim in its shard, `shard`; returns it when the caller must hear of it.
    ///
    /// With `returningEviction` the caller counts it; without, the shard does, and hands it back only
    /// when the owner must hear of each eviction.
    @inlinable
    static func record(
        _ victim: (key: Key, payload: Value),
        in shard: inout Shard,
        returningEviction: Bool
    ) -> Eviction {
        if returningEviction { return (true, (victim.key, victim.payload)) }
        shard.evictions &+= 1
        return (true, shard.reportsEvictions ? (victim.key, victim.payload) : nil)
    }

    /// Takes the room for one new entry of shard `index`, whose lock the caller holds, in a sharded
    /// store; returns `false` when the store is full.
    @inlinable
    func claimRoom(inShard index: Int) -> Bool {
        if shards[index].isStoreFull { return false }
        return claimSpare(inShard: index)
    }

    /// ``claimRoom(inShard:)`` when the shard does not know the store to be full: asks `room`.
    @usableFromInline
    func claimSpare(inShard index: Int) -> Bool {
        locks.lock(roomLock)
        defer { locks.unlock(roomLock) }
        if room.pointee.spare > 0 {
            room.pointee.spare -= 1
            return true
        }
        room.pointee.isFull = true
        shards[index].isStoreFull = true
        return false
    }

    /// Takes the room for one entry already stored, if a removal made some; returns whether it did.
    @usableFromInline
    func takeSpare() -> Bool {
        locks.withLock(roomLock) {
            guard room.pointee.spare > 0 else { return false }
            room.pointee.spare -= 1
            return true
        }
    }

    /// Gives the room of `count` entries removed from a shard back to the store; the caller may
    /// hold that shard's lock.
    ///
    /// - Returns: Whether shards may believe the store full; the caller must then call
    ///   ``announceRoom()`` once it holds no lock.
    @usableFromInline
    func releaseRoom(_ count: Int) -> Bool {
        guard shardCount > 1 && count > 0 else { return false }
        return locks.withLock(roomLock) {
            room.pointee.spare += count
            let wasFull = room.pointee.isFull
            room.pointee.isFull = false
            return wasFull
        }
    }

    /// Tells every shard that the store has room again, taking each shard's lock in turn.
    ///
    /// - Complexity: O(``shardCount``).
    @usableFromInline
    func announceRoom() { _ = forEachShard { $0.isStoreFull = false } }

    /// Evicts the policy's victim in another shard, one that holds more than its share, for a new key.
    ///
    /// The key was stored in shard `home` while the store was full and `home` held less than its
    /// share. The victim is that of the next shard after `home` that holds more than its share.
    /// Takes one shard lock at a time.
    ///
    /// Such a shard exists, since the shards together hold one entry more than their shares, unless
    /// removals made room meanwhile: then the entry takes that room, and nothing is evicted.
    /// - Complexity: O(``shardCount``) locks at most, unless other threads keep changing the store.
    @usableFromInline
    func evictElsewhere(for key: Key, storedIn home: Int, returningEviction: Bool) -> (key: Key, value: Value)? {
        while true {
            if takeSpare() { return nil }
            for offset in 1..<shardCount {
                let eviction = withShard((home + offset) & (shardCount - 1)) { shard -> Eviction in
                    guard shard.index.count > shard.share, let victim = shard.index.popVictim() else {
                        return (false, nil)
                    }
                    return Self.record(victim, in: &shard, returningEviction: returningEviction)
                }
                if eviction.isDone { return eviction.reported }
            }
            // Other threads moved entries between the shards meanwhile; any victim but `key` will do.
            let eviction = withShard(home) { shard -> Eviction in
                guard let victim = shard.index.victim(excluding: key),
                    let payload = shard.index.removeValue(forKey: victim)
                else { return (false, nil) }
                return Self.record((victim, payload), in: &shard, returningEviction: returningEviction)
            }
            if eviction.isDone { return eviction.reported }
        }
    }
}
