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
}
