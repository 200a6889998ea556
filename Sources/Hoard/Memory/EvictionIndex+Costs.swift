// What the entries of an `EvictionIndex` cost against their owner's cost limit: one `Int` per slot in
// `costs`, kept only once some cost is not 0, and their sum in `totalCost`.

extension EvictionIndex {
    /// The cost of the entry for `key`, or 0.
    @inlinable @inline(__always)
    func peekCost(_ key: Key) -> Int {
        slot(for: key, hash: key.hashValue).map(cost(of:)) ?? 0
    }

    /// The cost of the entry in `slot`.
    @inlinable
    func cost(of slot: Int32) -> Int { costs.isEmpty ? 0 : costs[Int(slot)] }

    /// Sets the cost of the entry in `slot`; the first cost that is not 0 makes `costs` hold one
    /// for every entry (0 for the others).
    @inlinable @inline(__always)
    mutating func setCost(_ cost: Int, of slot: Int32) {
        if costs.isEmpty {
            guard cost != 0 else { return }
            makeCosts()
        }
        totalCost += cost - costs[Int(slot)]
        costs[Int(slot)] = cost
    }

    /// Gives every entry a cost of 0 in `costs`, which was empty.
    @usableFromInline
    mutating func makeCosts() {
        costs = NodeBuffer(repeating: 0, count: entries.count)
    }
}
