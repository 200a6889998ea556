// The slots of an `EvictionIndex`: storing an entry in the parallel buffers and the table, putting a
// new one in place of another, and removing one by moving the last entry into its hole.

extension EvictionIndex {
    /// Stores a new entry in the next slot and adds it to the table, in no list yet; returns its
    /// slot.
    @inlinable
    mutating func appendEntry(key: Key, hash: Int, payload: Payload, cost: Int) -> Int32 {
        let slot = Int32(entries.count)
        let tag = SlotTable.tag(hash)
        entries.append(Entry(key: key, payload: payload))
        links.append(Link())
        tags.append(tag)
        if !costs.isEmpty { costs.append(0) }
        setCost(cost, of: slot)
        table.insert(tag: tag, slot: slot, tags: tags)
        return slot
    }

    /// Puts a new entry into `slot`, which is in no list, in place of the entry there; returns that
    /// entry.
    ///
    /// The new entry is in the table, in no list yet.
    @inlinable
    mutating func replaceEntry(in slot: Int32, key: Key, hash: Int, payload: Payload, cost: Int) -> Entry {
        table.remove(tag: tags[Int(slot)], slot: slot, tags: tags)
        let tag = SlotTable.tag(hash)
        tags[Int(slot)] = tag
        setCost(cost, of: slot)
        table.insert(tag: tag, slot: slot, tags: tags)
        return entries.exchange(Int(slot), with: Entry(key: key, payload: payload))
    }

    /// Removes the entry in `slot`, moving the last entry into its place; returns it.
    @inlinable
    @discardableResult
    mutating func remove(slot: Int32) -> Entry {
        let list = entries[Int(slot)].list
        setCost(0, of: slot)
        unlink(slot, from: list)
        if policy == .wTinyLFU { regionDidLose(list) } else { removeBucketIfEmpty(list) }
        table.remove(tag: tags[Int(slot)], slot: slot, tags: tags)
        let last = Int32(entries.count - 1)
        if slot != last {
            let moved = links[Int(last)]
            let movedList = entries[Int(last)].list
            let movedTag = tags[Int(last)]
            links[Int(slot)] = moved
            tags[Int(slot)] = movedTag
            if !costs.isEmpty { costs[Int(slot)] = costs[Int(last)] }
            if moved.prev >= 0 {
                links[Int(moved.prev)].next = slot
            } else {
                lists[Int(movedList)].head = slot
            }
            if moved.next >= 0 {
                links[Int(moved.next)].prev = slot
            } else {
                lists[Int(movedList)].tail = slot
            }
            table.move(tag: movedTag, from: last, to: slot)
            entries.swapAt(Int(slot), Int(last))
        }
        links.removeLast()
        tags.removeLast()
        if !costs.isEmpty { costs.removeLast() }
        return entries.removeLast()
    }
}
