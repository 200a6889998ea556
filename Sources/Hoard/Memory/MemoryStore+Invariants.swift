// The consistency checks of `MemoryStore`, for tests and debugging.

extension MemoryStore {
    /// Checks every shard's links and counts, that each key sits in its shard, and that the store
    /// counts its room right; traps on an inconsistency.
    ///
    /// For tests and debugging, while no other thread uses the store; nothing in the library calls it.
    func checkInvariants() {
        var total = 0
        var isAnyShardFull = false
        for index in 0..<shardCount {
            withShard(index) { shard in
                shard.index.checkInvariants()
                for entry in shard.index.entriesInEvictionOrder {
                    precondition(self.shard(for: entry.key.hashValue) == index, "a key sits in the wrong shard")
                }
                total += shard.index.count
                isAnyShardFull = isAnyShardFull || shard.isStoreFull
            }
        }
        precondition(total <= capacity, "the store holds more than its capacity")
        guard shardCount > 1 else { return }
        locks.withLock(roomLock) {
            precondition(room.pointee.spare == capacity - total, "the store's room is miscounted")
            precondition(room.pointee.isFull || !isAnyShardFull, "a shard believes the store full unannounced")
        }
    }
}
