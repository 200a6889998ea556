// LRU and LFU inside `EvictionIndex`: frequency buckets, the stamps that order them, and aging.
//
// A frequency bucket is a list of the nodes that share one access count, least recently used first.
// The buckets form a chain in increasing count, from `firstBucket` to `lastBucket`, linked by their
// `NodeList.prev` and `next`; the victim is the head of the first bucket. Under LRU every node stays
// in the one count-1 bucket. W-TinyLFU never reaches this file's functions but
// ``recordAccess(_:hash:)``, which hands it on.

extension EvictionIndex {
    // MARK: - Accesses

    /// Counts an access to `slot`, whose key's hash value is `hash`: moves it to the tail of its
    /// frequency bucket (LRU) or of the bucket for one access more (LFU), or hands it to W-TinyLFU.
    @inlinable
    mutating func recordAccess(_ slot: Int32, hash: Int) {
        if policy == .lru {
            // LRU keeps every entry in its one bucket, the first: the slot's bucket is not even read.
            // Stamps only order LFU merges: LRU needs none.
            if links[Int(slot)].next >= 0 { relink(slot, from: firstBucket, to: firstBucket) }
            return
        }
        if policy == .wTinyLFU {
            recordAdmissionAccess(slot, hash: hash)
            return
        }
        let link = links[Int(slot)]
        let bucket = entries[Int(slot)].list
        let isAlone = link.prev < 0 && link.next < 0
        let stamp = nextStamp()
        let count = lists[Int(bucket)].accessCount
        let next = lists[Int(bucket)].next
        if count == .max {
            relink(slot, from: bucket, to: bucket, stamp: stamp)
        } else if next >= 0 && lists[Int(next)].accessCount == count + 1 {
            relink(slot, from: bucket, to: next, stamp: stamp)
            if isAlone { removeBucket(bucket) }
        } else if isAlone {
            lists[Int(bucket)].accessCount = count + 1
            entries[Int(slot)].stamp = stamp
        } else {
            let created = makeBucket(accessCount: count + 1, after: bucket)
            relink(slot, from: bucket, to: created, stamp: stamp)
        }
        tickAging()
    }

    /// Adds a new entry as the most recent one of the frequency bucket for `count` accesses, which
    /// it creates if need be.
    ///
    /// - Complexity: O(1) for a count of 1 or of at least the last bucket's; otherwise O(b) in the
    ///   number of frequency buckets.
    @inlinable
    mutating func insertNew(key: Key, hash: Int, payload: Payload, count: UInt32, cost: Int) {
        linkNew(appendEntry(key: key, hash: hash, payload: payload, cost: cost), count: count)
    }

    /// Puts `slot`, a new entry in no list, as the most recent one of the frequency bucket for
    /// `count` accesses, which it creates if need be.
    ///
    /// - Complexity: as ``insertNew(key:hash:payload:count:cost:)``.
    @inlinable
    mutating func linkNew(_ slot: Int32, count: UInt32) {
        // Find the bucket with this count, or where it belongs. Restoring appends in increasing count
        // order, so the last bucket is checked first: O(1) per entry there.
        var previous: Int32 = -1
        var bucket = firstBucket
        if count > 1 {
            if lastBucket >= 0 && lists[Int(lastBucket)].accessCount <= count {
                bucket = lastBucket
                if lists[Int(bucket)].accessCount < count {
                    previous = bucket
                    bucket = -1
                }
            } else {
                while bucket >= 0 && lists[Int(bucket)].accessCount < count {
                    previous = bucket
                    bucket = lists[Int(bucket)].next
                }
            }
        }
        if bucket < 0 || lists[Int(bucket)].accessCount != count {
            bucket = makeBucket(accessCount: count, after: previous)
        }
        appendNode(slot, to: bucket, stamp: policy == .lfu ? nextStamp() : 0)
    }

    // MARK: - Stamps

    /// The stamp for an access now: the index clock, advanced.
    ///
    /// The clock has 32 bits so that the stamp fits in `Link`. It never wraps: when it is about to,
    /// every entry is restamped 1...n in its current order first (once per 4 billion accesses, in
    /// O(n log n)), so that stamps always compare in access order.
    @inlinable
    mutating func nextStamp() -> UInt32 {
        if clock == .max { renumberStamps() }
        clock += 1
        return clock
    }

    /// Restamps the entries 1...n in the order of their stamps and sets the clock to n.
    ///
    /// - Complexity: O(n log n).
    @usableFromInline
    mutating func renumberStamps() {
        let order = (0..<Int32(count)).sorted { entries[Int($0)].stamp < entries[Int($1)].stamp }
        for (rank, slot) in order.enumerated() { entries[Int(slot)].stamp = UInt32(rank + 1) }
        clock = UInt32(order.count)
    }

    // MARK: - The chain of frequency buckets

    /// Creates an empty frequency bucket after `previous` (or first when `previous` is -1).
    @inlinable
    mutating func makeBucket(accessCount: UInt32, after previous: Int32) -> Int32 {
        var bucket = NodeList(accessCount: accessCount)
        bucket.prev = previous
        bucket.next = previous >= 0 ? lists[Int(previous)].next : firstBucket
        let index: Int32
        if let free = freeBuckets.popLast() {
            index = free
            lists[Int(index)] = bucket
        } else {
            index = Int32(lists.count)
            lists.append(bucket)
        }
        if bucket.next >= 0 { lists[Int(bucket.next)].prev = index } else { lastBucket = index }
        if previous >= 0 { lists[Int(previous)].next = index } else { firstBucket = index }
        return index
    }

    /// Removes the frequency bucket `bucket` from the chain if it holds no node.
    @inlinable
    mutating func removeBucketIfEmpty(_ bucket: Int32) {
        if lists[Int(bucket)].head < 0 { removeBucket(bucket) }
    }

    /// Takes the empty frequency bucket `bucket` out of the chain and frees it.
    @inlinable
    mutating func removeBucket(_ bucket: Int32) {
        let current = lists[Int(bucket)]
        if current.prev >= 0 { lists[Int(current.prev)].next = current.next } else { firstBucket = current.next }
        if current.next >= 0 { lists[Int(current.next)].prev = current.prev } else { lastBucket = current.prev }
        freeBuckets.append(bucket)
    }

    // MARK: - Aging

    /// Counts an operation towards the next aging (LFU only).
    @inlinable
    mutating func tickAging() {
        guard policy == .lfu else { return }
        agingCountdown -= 1
        if agingCountdown <= 0 { age() }
    }

    /// Halves every access count (`c` becomes `(c + 1) / 2`), merging frequency buckets whose counts
    /// meet.
    ///
    /// - Complexity: O(n), once every `agingPeriod` operations, so O(1) amortised.
    @inlinable
    mutating func age() {
        agingCountdown = agingPeriod
        var kept: Int32 = -1
        var bucket = firstBucket
        while bucket >= 0 {
            let next = lists[Int(bucket)].next
            let count = lists[Int(bucket)].accessCount
            let halved = count / 2 + count & 1  // (count + 1) / 2 without overflowing at UInt32.max
            if kept >= 0 && lists[Int(kept)].accessCount == halved {
                mergeByStamp(bucket, into: kept)
                // Unlink the emptied bucket (it directly follows `kept`).
                lists[Int(kept)].next = next
                if next >= 0 { lists[Int(next)].prev = kept } else { lastBucket = kept }
                freeBuckets.append(bucket)
            } else {
                lists[Int(bucket)].accessCount = max(1, halved)
                kept = bucket
            }
            bucket = next
        }
    }

    /// Moves every node of the frequency bucket `source` into `target`, keeping both lists'
    /// least-recent-first order.
    ///
    /// - Complexity: O(n) in the nodes of both buckets.
    @inlinable
    mutating func mergeByStamp(_ source: Int32, into target: Int32) {
        var left = lists[Int(target)].head
        var right = lists[Int(source)].head
        var tail: Int32 = -1
        var head: Int32 = -1
        while left >= 0 || right >= 0 {
            let takeLeft = right < 0 || (left >= 0 && entries[Int(left)].stamp <= entries[Int(right)].stamp)
            let slot = takeLeft ? left : right
            if takeLeft { left = links[Int(left)].next } else { right = links[Int(right)].next }
            entries[Int(slot)].list = target
            links[Int(slot)].prev = tail
            links[Int(slot)].next = -1
            if tail >= 0 { links[Int(tail)].next = slot } else { head = slot }
            tail = slot
        }
        lists[Int(target)].head = head
        lists[Int(target)].tail = tail
        lists[Int(source)].head = -1
        lists[Int(source)].tail = -1
    }
}
