// The entry an `EvictionIndex` gives up next, under every policy: which one it is, removing it, and
// reusing its slot for a new entry. W-TinyLFU's choice itself is in `EvictionIndex+AdmissionOrder.swift`;
// LRU and LFU take the head of the first frequency bucket.

extension EvictionIndex {
    /// The entry the policy would remove next, without removing it.
    @usableFromInline
    var victim: (key: Key, payload: Payload)? {
        victimSlot.map { (entries[Int($0)].key, entries[Int($0)].payload) }
    }

    /// The slot of the entry the policy would remove next (``victim``), or `nil` when it is empty.
    @usableFromInline
    var victimSlot: Int32? {
        if policy == .wTinyLFU {
            let slot = admissionChoice().victim
            return slot >= 0 ? slot : nil
        }
        return firstBucket >= 0 ? lists[Int(firstBucket)].head : nil
    }

    /// The key the policy would remove next other than `key`, without removing it.
    @usableFromInline
    func victim(excluding key: Key) -> Key? {
        if policy == .wTinyLFU { return admissionVictim(excluding: key) }
        guard firstBucket >= 0 else { return nil }
        let first = lists[Int(firstBucket)].head
        if entries[Int(first)].key != key { return entries[Int(first)].key }
        // `key` is the next victim itself: take the one after it.
        let second = links[Int(first)].next
        if second >= 0 { return entries[Int(second)].key }
        let nextBucket = lists[Int(firstBucket)].next
        return nextBucket >= 0 ? entries[Int(lists[Int(nextBucket)].head)].key : nil
    }

    /// Removes and returns the entry the policy chooses.
    ///
    /// Under W-TinyLFU, a window candidate that wins its duel moves to probation.
    @inlinable
    mutating func popVictim() -> (key: Key, payload: Payload)? {
        makeUnique()
        if policy == .wTinyLFU {
            guard let node = popAdmissionVictim() else { return nil }
            return (node.key, node.payload)
        }
        guard firstBucket >= 0 else { return nil }
        let node = remove(slot: lists[Int(firstBucket)].head)
        return (node.key, node.payload)
    }

    /// Removes the entry the policy chooses and stores `payload` for `key`, which the index does not
    /// hold, in its slot; returns the entry removed, or `nil` when the index was empty.
    ///
    /// The same as ``popVictim()`` then ``insert(newKey:hash:payload:cost:)``, but for the slots the
    /// entries take: the new entry reuses the victim's, so the last entry does not move into the hole
    /// (its cell in the table, its neighbours' links) only for a new entry to be appended after it.
    @inlinable
    mutating func replaceVictim(
        withNewKey key: Key,
        hash: Int,
        payload: Payload,
        cost: Int = 0
    ) -> (key: Key, payload: Payload)? {
        makeUnique()
        let slot: Int32
        if policy == .wTinyLFU {
            stepDownProtectedVictim()
            let choice = admissionChoice()
            guard choice.victim >= 0 else {
                insertIntoWindow(key: key, hash: hash, payload: payload, cost: cost)
                return nil
            }
            if choice.admitted >= 0 { move(choice.admitted, to: Self.probationRegion) }
            slot = choice.victim
        } else {
            guard firstBucket >= 0 else {
                insert(newKey: key, hash: hash, payload: payload, cost: cost)
                return nil
            }
            slot = lists[Int(firstBucket)].head
        }
        let list = entries[Int(slot)].list
        unlink(slot, from: list)
        if policy == .wTinyLFU { regionDidLose(list) } else { removeBucketIfEmpty(list) }
        let old = replaceEntry(in: slot, key: key, hash: hash, payload: payload, cost: cost)
        if policy == .wTinyLFU {
            linkIntoWindow(slot, hash: hash)
        } else {
            linkNew(slot, count: 1)
            tickAging()
        }
        return (old.key, old.payload)
    }
}
