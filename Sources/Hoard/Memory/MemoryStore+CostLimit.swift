// The cost limit of a `MemoryStore`: a set that evicts until both the count and the cost limit hold.
// Only a store of one shard has one (a store made with `sharded: false`).

extension MemoryStore {
    /// Stores `value` with a cost, evicting until both the count and `costLimit` hold.
    ///
    /// Victims are chosen among the other entries, in policy order. A value whose cost exceeds
    /// `entryCostLimit` (by default `costLimit`) is not kept, and the older value for its key is
    /// removed (it is stale). Only for a store made with `sharded: false`.
    /// - Returns: The entries evicted, each with why (the count limit or the cost limit), the stale
    ///   value dropped when `value` is not kept, and whether `value` was kept.
    func set(
        _ value: Value,
        forKey key: Key,
        cost: Int,
        costLimit: Int,
        entryCostLimit: Int? = nil
    ) -> (evicted: [(key: Key, value: Value, reason: EvictionReason)], stale: Value?, isKept: Bool) {
        precondition(shardCount == 1, "A store with a cost limit must not be sharded.")
        return withShard(0) { shard in
            var evicted: [(key: Key, value: Value, reason: EvictionReason)] = []
            guard cost <= min(costLimit, entryCostLimit ?? costLimit) else {
                return (evicted, shard.index.removeValue(forKey: key), false)
            }
            let replaced = shard.index.contains(key)
            let costBefore = shard.index.totalCost - (replaced ? shard.index.peekCost(key) : 0)
            var freed = 0
            while shard.index.count - (replaced ? 1 : 0) > 0 {
                let overCount = !replaced && shard.index.count >= shard.share
                guard overCount || costBefore - freed + cost > costLimit,
                    let victim = shard.index.victim(excluding: key)
                else { break }
                freed += shard.index.peekCost(victim)
                if let payload = shard.index.removeValue(forKey: victim) {
                    evicted.append((victim, payload, overCount ? .capacity : .cost))
                }
            }
            shard.index.upsert(value, forKey: key, cost: cost)
            return (evicted, nil, true)
        }
    }

    /// The sum of the costs of the stored values.
    var totalCost: Int { forEachShard(\.index.totalCost).reduce(0, +) }
}
