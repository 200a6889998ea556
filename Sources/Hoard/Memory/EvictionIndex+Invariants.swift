// The consistency checks of `EvictionIndex`, for tests and debugging; nothing in the library calls
// them.

extension EvictionIndex {
    /// Checks every link and count; traps on the first inconsistency.
    ///
    /// For tests and debugging; nothing in the library calls it.
    ///
    /// - Parameter tagsFromKeys: Whether every tag is the low bits of its key's `hashValue`; false for
    ///   an owner that passes hashes of its own (see `DiskEntryIndex`), whose tags are then only
    ///   checked to find their entries.
    /// - Complexity: O(n).
    func checkInvariants(tagsFromKeys: Bool = true) {
        if policy == .wTinyLFU {
            checkAdmissionInvariants(tagsFromKeys: tagsFromKeys)
            return
        }
        var seen = 0
        var bucket = firstBucket
        var previousBucket: Int32 = -1
        var previousCount: UInt32 = 0
        while bucket >= 0 {
            let current = lists[Int(bucket)]
            precondition(current.prev == previousBucket, "bucket back link")
            precondition(current.accessCount > previousCount, "bucket counts must increase")
            precondition(current.head >= 0, "empty bucket in the chain")
            if policy == .lru { precondition(current.accessCount == 1, "LRU uses one bucket") }
            var slot = current.head
            var previous: Int32 = -1
            while slot >= 0 {
                let link = links[Int(slot)]
                precondition(link.prev == previous && entries[Int(slot)].list == bucket, "node links")
                checkTable(slot, tagsFromKeys: tagsFromKeys)
                precondition(entries[Int(slot)].stamp <= clock, "stamp after the clock")
                seen += 1
                previous = slot
                slot = link.next
            }
            precondition(current.tail == previous, "bucket tail")
            previousCount = current.accessCount
            previousBucket = bucket
            bucket = current.next
        }
        checkBufferCounts(seen: seen)
        precondition(lastBucket == previousBucket, "last bucket")
    }

    /// Checks the regions' links and sizes, the targets, the sketch and the experts; traps on the
    /// first inconsistency.
    ///
    /// - Complexity: O(n) in the entries and the experts' entries.
    func checkAdmissionInvariants(tagsFromKeys: Bool) {
        precondition(firstBucket == -1 && lastBucket == -1 && lists.count == 3, "W-TinyLFU regions")
        var seen = 0
        var sizes = [0, 0, 0]
        for region in 0..<Int32(3) {
            var slot = lists[Int(region)].head
            var previous: Int32 = -1
            while slot >= 0 {
                let link = links[Int(slot)]
                precondition(link.prev == previous && entries[Int(slot)].list == region, "node links")
                checkTable(slot, tagsFromKeys: tagsFromKeys)
                precondition(
                    region != Self.windowRegion || entries[Int(slot)].stamp & AdmissionState.incumbentBit == 0,
                    "an incumbent in the window: only main hits make one"
                )
                precondition(
                    region == Self.protectedRegion || entries[Int(slot)].stamp & AdmissionState.referencedBit == 0,
                    "a mark of a protected hit outside protected"
                )
                sizes[Int(region)] += 1
                seen += 1
                previous = slot
                slot = link.next
            }
            precondition(lists[Int(region)].tail == previous, "region tail")
            precondition(lists[Int(region)].prev == -1 && lists[Int(region)].next == -1, "a region in the chain")
        }
        precondition(sizes[0] == admission.windowCount, "window size")
        precondition(sizes[2] == admission.protectedCount, "protected size")
        checkBufferCounts(seen: seen)
        admission.checkInvariants()
    }

    /// Checks that the table finds the entry in `slot` from its hash, and that its tag is its key's.
    func checkTable(_ slot: Int32, tagsFromKeys: Bool) {
        let key = entries[Int(slot)].key
        let hash = tagsFromKeys ? key.hashValue : Int(truncatingIfNeeded: tags[Int(slot)])
        precondition(self.slot(for: key, hash: hash) == slot, "slot map")
        precondition(tags[Int(slot)] == SlotTable.tag(hash), "node tag")
    }

    /// Checks that every buffer holds one element per entry and that the costs add up.
    func checkBufferCounts(seen: Int) {
        precondition(seen == entries.count && seen == table.count, "node count")
        precondition(
            links.count == seen && tags.count == seen && (costs.isEmpty || costs.count == seen),
            "buffer counts"
        )
        precondition(totalCost == costs.reduce(0, +), "total cost")
    }
}
