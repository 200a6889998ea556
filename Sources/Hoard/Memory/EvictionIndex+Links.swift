// The lists of `EvictionIndex`: taking a node out of its list and putting it at a list's tail.

extension EvictionIndex {
    /// Takes `slot` out of the list of `bucket`, the bucket it is in.
    @inlinable
    mutating func unlink(_ slot: Int32, from bucket: Int32) {
        // The bucket is written only when `slot` is its head or tail: through the plain subscript,
        // so that the common case pays no uniqueness check for it.
        let (prev, next) = links.withMutableView { links in
            let prev = links[Int(slot)].prev
            let next = links[Int(slot)].next
            if prev >= 0 { links[Int(prev)].next = next }
            if next >= 0 { links[Int(next)].prev = prev }
            return (prev, next)
        }
        if prev < 0 { buckets[Int(bucket)].head = next }
        if next < 0 { buckets[Int(bucket)].tail = prev }
    }

    /// Puts an unlinked `slot` at the tail of `bucket`'s list and records the bucket and `stamp`
    /// in its `Link`.
    @inlinable
    mutating func appendNode(_ slot: Int32, to bucket: Int32, stamp: UInt32 = 0) {
        links.withMutableView { links in
            buckets.withMutableView { buckets in
                let tail = buckets[Int(bucket)].tail
                links[Int(slot)] = Link(prev: tail, next: -1, bucket: bucket, stamp: stamp)
                if tail >= 0 { links[Int(tail)].next = slot } else { buckets[Int(bucket)].head = slot }
                buckets[Int(bucket)].tail = slot
            }
        }
    }

    /// Moves `slot` from `bucket`, the bucket it is in, to the tail of `target` (which may be the
    /// same bucket) with a new `stamp`: ``unlink(_:from:)`` then ``appendNode(_:to:stamp:)`` in one
    /// pass, so that a hit checks the uniqueness of the links and of the buckets once each.
    ///
    /// `target` must exist already: nothing may append to `buckets` while its view is alive.
    @inlinable @inline(__always)
    mutating func relink(_ slot: Int32, from bucket: Int32, to target: Int32, stamp: UInt32 = 0) {
        links.withMutableView { links in
            buckets.withMutableView { buckets in
                let prev = links[Int(slot)].prev
                let next = links[Int(slot)].next
                if prev >= 0 { links[Int(prev)].next = next } else { buckets[Int(bucket)].head = next }
                if next >= 0 { links[Int(next)].prev = prev } else { buckets[Int(bucket)].tail = prev }
                let tail = buckets[Int(target)].tail
                links[Int(slot)] = Link(prev: tail, next: -1, bucket: target, stamp: stamp)
                if tail >= 0 { links[Int(tail)].next = slot } else { buckets[Int(target)].head = slot }
                buckets[Int(target)].tail = slot
            }
        }
    }
}
