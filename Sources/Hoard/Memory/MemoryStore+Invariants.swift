// The consistency checks of `MemoryStore`, for tests and debugging.

extension MemoryStore {
    /// Checks every shard's links and counts, and that each key sits in its shard; traps on an
    /// inconsistency.
    ///
    /// For tests and debugging; nothing in the library calls it.
    func checkInvariants() {
        for index in 0..<shardCount {
            withShard(index) { shard in
                shard.index.checkInvariants()
                precondition(shard.index.count <= shard.capacity, "shard \(index) holds more than its capacity")
                for entry in shard.index.entriesInEvictionOrder {
                    precondition(self.shard(for: entry.key.hashValue) == index, "a key sits in the wrong shard")
                }
            }
        }
    }
}
