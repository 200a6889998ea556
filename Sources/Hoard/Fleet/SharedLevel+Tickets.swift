// The tickets of `SharedLevel.State`, which a backlog of writes makes many. With the queue of keys
// waiting for a worker (a `FrontQueue`), each costs O(1) per write (amortised), so a backlog drains
// at the same rate per write whatever its length.

extension SharedLevel {
    /// The tickets of the changes not made yet, which tells its oldest without a scan.
    ///
    /// Tickets are generations, held from when they are handed out, in increasing order: `order`
    /// lists them in that order, and a ticket that is gone leaves it once it reaches the front.
    struct Tickets: Sendable {
        private var held: Set<UInt64> = []
        /// The tickets held, oldest first, and some that are gone behind the oldest.
        private var order = FrontQueue<UInt64>()

        var isEmpty: Bool { held.isEmpty }

        func contains(_ ticket: UInt64) -> Bool { held.contains(ticket) }

        /// The oldest ticket held, or `nil` when none is.
        var oldest: UInt64? { order.first }

        /// How many tickets `order` lists, gone ones included: what the tickets cost in memory.
        var listedCount: Int { order.count }

        /// Holds `ticket`, the newest generation handed out.
        mutating func insert(_ ticket: UInt64) {
            assert(order.first.map { ticket > $0 } ?? true, "a ticket older than one held")
            held.insert(ticket)
            order.append(ticket)
            // A ticket stuck at the front (a write whose level never answers) keeps every later one
            // listed, gone or not: rebuilt from those held once most are gone, in O(1) amortised.
            if order.count > 2 * held.count + 1_024 {
                order = FrontQueue()
                for kept in held.sorted() { order.append(kept) }
            }
        }

        mutating func remove(_ ticket: UInt64) {
            held.remove(ticket)
            dropGoneFront()
        }

        mutating func subtract(_ removed: [UInt64]) {
            held.subtract(removed)
            dropGoneFront()
        }

        /// Takes the tickets that are gone off the front, so that the front is the oldest held.
        private mutating func dropGoneFront() {
            while let front = order.first, !held.contains(front) { _ = order.popFirst() }
        }
    }
}
