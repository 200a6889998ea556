// The lists of `EvictionIndex`: taking a node out of its list and putting it at a list's tail.
//
// A list is a frequency bucket (LRU, LFU) or a region (W-TinyLFU); these functions serve both, and
// neither read nor change the chain of frequency buckets. A hit moves its node with `relink`, so the
// functions here are on the hit path: they stay `@inlinable`.

extension EvictionIndex {
    /// Takes `slot` out of `list`, the list it is in.
    @inlinable
    mutating func unlink(_ slot: Int32, from list: Int32) {
        // The list is written only when `slot` is its head or tail: through the plain subscript.
        let (prev, next) = links.withMutableView { links in
            let prev = links[Int(slot)].prev
            let next = links[Int(slot)].next
            if prev >= 0 { links[Int(prev)].next = next }
            if next >= 0 { links[Int(next)].prev = prev }
            return (prev, next)
        }
        if prev < 0 { lists[Int(list)].head = next }
        if next < 0 { lists[Int(list)].tail = prev }
    }

    /// Puts `slot`, in no list, at the tail of `list` and records the list and `stamp` in its
    /// `Entry`.
    @inlinable
    mutating func appendNode(_ slot: Int32, to list: Int32, stamp: UInt32 = 0) {
        links.withMutableView { links in
            lists.withMutableView { lists in
                let tail = lists[Int(list)].tail
                links[Int(slot)] = Link(prev: tail, next: -1)
                if tail >= 0 { links[Int(tail)].next = slot } else { lists[Int(list)].head = slot }
                lists[Int(list)].tail = slot
            }
        }
        entries.withMutableView { entries in
            entries[Int(slot)].list = list
            entries[Int(slot)].stamp = stamp
        }
    }

    /// Moves `slot` from `list`, the list it is in, to the tail of `target` (which may be the same
    /// list) with a new `stamp`: ``unlink(_:from:)`` then ``appendNode(_:to:stamp:)`` in one pass,
    /// with the addresses of the links and of the lists read once each.
    ///
    /// `target` must exist already: nothing may append to `lists` while its view is alive.
    @inlinable @inline(__always)
    mutating func relink(_ slot: Int32, from list: Int32, to target: Int32, stamp: UInt32 = 0) {
        links.withMutableView { links in
            lists.withMutableView { lists in
                let prev = links[Int(slot)].prev
                let next = links[Int(slot)].next
                if prev >= 0 { links[Int(prev)].next = next } else { lists[Int(list)].head = next }
                if next >= 0 { links[Int(next)].prev = prev } else { lists[Int(list)].tail = prev }
                let tail = lists[Int(target)].tail
                links[Int(slot)] = Link(prev: tail, next: -1)
                if tail >= 0 { links[Int(tail)].next = slot } else { lists[Int(target)].head = slot }
                lists[Int(target)].tail = slot
            }
        }
        entries.withMutableView { entries in
            entries[Int(slot)].list = target
            entries[Int(slot)].stamp = stamp
        }
    }
}
