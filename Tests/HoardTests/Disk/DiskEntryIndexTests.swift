import Testing

@testable import Hoard

@Suite struct DiskEntryIndexTests {
    /// The index is `@unchecked Sendable` because a copy copies the shared buffers before its first
    /// write (`EvictionIndex.makeUnique()`): copies changed on several threads at once must neither
    /// race (run it under the thread sanitizer) nor change each other.
    @Test(arguments: EvictionPolicy.allCases)
    func copiesChangeIndependentlyOnSeveralThreads(policy: EvictionPolicy) async {
        let digests = (0..<3_000).map { DiskKey("key \($0)").digest }
        var original = DiskEntryIndex(policy: policy, capacity: 2_000)
        for (size, digest) in digests.prefix(2_000).enumerated() {
            original.upsert(DiskEntryInfo(size: size), forKey: digest)
        }
        for digest in digests.prefix(500) { _ = original.access(digest) }
        let before = original.entriesInEvictionOrder.map { "\($0.key.hex) \($0.payload.size) \($0.count)" }
        let shared = original

        let results = await withTaskGroup(of: (count: Int, bytes: Int).self) { group in
            for task in 0..<4 {
                group.addTask {
                    var copy = shared
                    for step in 0..<1_000 {
                        let digest = digests[(task * 250 + step * 7) % digests.count]
                        switch step % 4 {
                        case 0: copy.upsert(DiskEntryInfo(size: 1), forKey: digest)
                        case 1: _ = copy.access(digest)
                        case 2: copy.removeValue(forKey: digest)
                        default: _ = copy.makeRoom(forCount: 1, bytes: 0, capacity: 1_500, byteLimit: nil)
                        }
                    }
                    copy.checkInvariants()
                    return (copy.count, copy.byteCount)
                }
            }
            var results: [(count: Int, bytes: Int)] = []
            for await result in group { results.append(result) }
            return results
        }

        #expect(results.count == 4 && results.allSatisfy { $0.count <= 2_000 })
        #expect(original.entriesInEvictionOrder.map { "\($0.key.hex) \($0.payload.size) \($0.count)" } == before)
        #expect(original.byteCount == (0..<2_000).reduce(0, +))
        original.checkInvariants()
    }

    /// An entry keeps 28 bytes of its digest, its index tag standing for the other 4: whatever the
    /// permutation's key, every digest comes back whole, with its size and its expiry's exact bits.
    ///
    /// With its list and stamp, the entry takes 48 bytes, and its links 8.
    @Test(arguments: [0, 1, 0x9E37_79B9, UInt32.max])
    func anEntryTakesFortyEightBytesAndEveryDigestComesBackWhole(tagKey: UInt32) {
        typealias Order = EvictionIndex<DiskEntryIndex.Tail, DiskEntryIndex.Info>
        #expect(MemoryLayout<Order.Entry>.stride == 48 && MemoryLayout<Order.Link>.stride == 8)
        var index = DiskEntryIndex(policy: .wTinyLFU, capacity: 1_000, tagKey: tagKey)
        let digests = (0..<1_000).map { DiskKey("key \($0)").digest }
        let expiries: [Expiry] = [
            .never, .at(0), .at(-12.5), .at(1_700_000_000.123_456_7), .at(.greatestFiniteMagnitude),
        ]
        for (number, digest) in digests.enumerated() {
            #expect(index.digest(tail: DiskEntryIndex.Tail(digest), tag: index.tag(of: digest)) == digest)
            index.upsert(DiskEntryInfo(size: number, expiresAt: expiries[number % expiries.count]), forKey: digest)
        }
        index.checkInvariants()
        let stored = index.entriesInEvictionOrder
        #expect(Set(stored.map(\.key)) == Set(digests))
        for entry in stored {
            let number = digests.firstIndex(of: entry.key) ?? -1
            #expect(entry.payload.size == number)
            #expect(
                entry.payload.expiresAt.deadline.bitPattern == expiries[number % expiries.count].deadline.bitPattern
            )
            #expect(index.peek(entry.key)?.size == number)
        }
    }

    /// Two digests that differ only in their first 4 bytes (a forged index may hold them) are two
    /// entries, even where the table's cells keep too few tag bits to tell them apart.
    @Test(arguments: EvictionPolicy.allCases)
    func digestsThatDifferOnlyInTheirTagsAreTwoEntries(policy: EvictionPolicy) {
        var index = DiskEntryIndex(policy: policy, capacity: 4, tagKey: 0)
        let tail = DiskEntryIndex.Tail(DiskKey("shared tail").digest)
        // Tags that differ in their lowest bit only, which an 8-cell table keeps in no cell: the
        // second's home is cell 0, taken by a third entry, so that its probe meets the first in
        // cell 1.
        let first = index.digest(tail: tail, tag: 0x41)
        let second = index.digest(tail: tail, tag: 0x40)
        let filler = index.digest(tail: DiskEntryIndex.Tail(DiskKey("filler").digest), tag: 0x00)
        index.upsert(DiskEntryInfo(size: 10), forKey: filler)
        index.upsert(DiskEntryInfo(size: 1), forKey: first)
        #expect(!index.contains(second) && index.peek(second) == nil)
        index.upsert(DiskEntryInfo(size: 100), forKey: second)
        #expect(index.count == 3 && index.byteCount == 111)
        #expect([first, second, filler].map { index.peek($0)?.size } == [1, 100, 10])
        index.checkInvariants()
        #expect(index.removeValue(forKey: second)?.size == 100)
        #expect(index.peek(first)?.size == 1 && index.byteCount == 11)
        index.checkInvariants()
    }

    /// Entries appended as known to be new, into reserved room (a rebuild), are found with their
    /// sizes, large ones included, and count in the byte total as appended ones do.
    @Test(arguments: EvictionPolicy.allCases)
    func entriesAppendedAsNewAreFoundAndCounted(policy: EvictionPolicy) {
        var index = DiskEntryIndex(policy: policy, capacity: .max)
        let digests = (0..<300).map { DiskKey("entry \($0)").digest }
        let sizes = digests.indices.map { $0 == 7 ? Int(exactly: Int64(UInt32.max) + 5) ?? 5 : $0 * 3 }
        index.reserveCapacity(digests.count)
        for (digest, size) in zip(digests, sizes) {
            index.appendNew(DiskEntryInfo(size: size), forKey: digest, count: 1)
        }
        #expect(index.count == digests.count)
        #expect(digests.map { index.peek($0)?.size } == sizes)
        #expect(index.byteCount == sizes.reduce(0, +))
        #expect(index.entriesInEvictionOrder.map(\.key) == digests)
        index.checkInvariants()
        #expect(index.removeValue(forKey: digests[7])?.size == sizes[7])
        #expect(index.byteCount == sizes.reduce(0, +) - sizes[7])
        index.checkInvariants()
    }

    /// A size that 32 bits do not hold is kept aside, exactly, and counts in full against the byte
    /// limit; it goes when its entry goes, by any road.
    #if _pointerBitWidth(_64)
    @Test func sizesOfFourGiBAndMoreAreKeptExactly() throws {
        var index = DiskEntryIndex(policy: .lru, capacity: 10)
        let huge = try #require(Int(exactly: Int64(1) << 40))
        let sizes = [Int(UInt32.max) - 1, Int(UInt32.max), huge, 7]
        let digests = sizes.indices.map { DiskKey("large \($0)").digest }
        for (size, digest) in zip(sizes, digests) { index.upsert(DiskEntryInfo(size: size), forKey: digest) }
        index.checkInvariants()
        #expect(digests.map { index.peek($0)?.size } == sizes)
        #expect(index.byteCount == sizes.reduce(0, +))

        index.upsert(DiskEntryInfo(size: 3), forKey: digests[1])
        #expect(index.byteCount == sizes[0] + 3 + huge + 7)
        index.checkInvariants()

        // The byte limit evicts in LRU order: the first entry, then the huge one.
        let victims = index.makeRoom(forCount: 0, bytes: 0, capacity: 10, byteLimit: 100)
        #expect(victims.map(\.key) == [digests[0], digests[2]])
        #expect(victims.map(\.payload.size) == [sizes[0], huge])
        #expect(index.byteCount == 10)
        index.checkInvariants()

        index.upsert(DiskEntryInfo(size: huge), forKey: digests[3])
        #expect(index.removeValue(forKey: digests[3])?.size == huge)
        #expect(index.byteCount == 3)
        index.checkInvariants()
    }
    #endif
}
