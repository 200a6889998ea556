import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// The default eviction policy, seen through the public entry points: every level that picks a
/// policy by default picks the adaptive W-TinyLFU, and it behaves as one (a loop a little larger
/// than the cache, where LRU and LFU hit nothing, mostly hits).
@Suite struct DefaultPolicyTests {
    @Test func everyLevelDefaultsToTheAdaptivePolicy() throws {
        let folder = TemporaryDirectory()
        #expect(CacheBuilder<String>(serializer: StringSerializer()).evictionPolicy == .wTinyLFU)
        let cache = try folder.stringBuilder().maxDiskCount(0).build()
        #expect(cache.memory?.policy == .wTinyLFU)
        #expect(MemoryCacheLevel<String, Int>().store.policy == .wTinyLFU)
    }

    /// The hit rate, in percent, of the second half of `passes` passes of a loop over `loop` keys
    /// through a memory-only cache of `capacity` with `policy` (the default when `nil`).
    private func loopHitRate(_ policy: EvictionPolicy?, capacity: Int, loop: Int, passes: Int) throws -> Double {
        let folder = TemporaryDirectory()
        var builder = folder.stringBuilder().maxRamCount(capacity).maxDiskCount(0)
        if let policy { builder = builder.evictionPolicy(policy) }
        let cache = try builder.build()
        var hits = 0
        var counted = 0
        for pass in 0..<passes {
            for key in 0..<loop {
                let hit = cache["\(key)"] != nil
                if !hit { cache["\(key)"] = "v\(key)" }
                if pass >= passes / 2 {
                    counted += 1
                    if hit { hits += 1 }
                }
            }
        }
        cache.memory?.checkInvariants()
        return 100 * Double(hits) / Double(max(1, counted))
    }

    @Test func aDefaultCacheKeepsMostOfALoopSlightlyLargerThanItself() throws {
        // 110 keys in a loop through 100 entries: LRU always evicts the key needed next, and LFU's
        // equal counts make it do the same. The best possible is about 100 of 110.
        let adaptive = try loopHitRate(nil, capacity: 100, loop: 110, passes: 200)
        let lru = try loopHitRate(.lru, capacity: 100, loop: 110, passes: 200)
        let lfu = try loopHitRate(.lfu, capacity: 100, loop: 110, passes: 200)
        #expect(lru == 0)
        #expect(lfu < 5, "lfu \(lfu) %")
        #expect(adaptive >= 75, "default \(adaptive) %")
    }
}
