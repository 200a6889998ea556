import HoardTestSupport
import Testing

@testable import Hoard

/// A sharded W-TinyLFU store runs one climber, in its first shard, and the other shards take the
/// window it chooses.
@Suite struct ShardedWindowTests {
    /// Each shard's window share and admission mode.
    private static func windows(of store: MemoryStore<StableKey, Int>) -> [(share: Double, admitsAll: Bool)] {
        (0..<store.shardCount).map { index in store.withShard(index) { $0.index.admission.window } }
    }

    @Test func onlyTheFirstShardRunsExperts() {
        let sharded = MemoryStore<StableKey, Int>(capacity: 40_000, policy: .wTinyLFU)
        #expect(sharded.shardCount == 4)
        let active = (0..<sharded.shardCount).map { index in
            sharded.withShard(index) { $0.index.admission.experts.isActive }
        }
        #expect(active == [true, false, false, false])
        // A follower samples no key, whatever its hash.
        sharded.withShard(1) { shard in
            #expect((0..<100_000).allSatisfy { !shard.index.admission.experts.samples(UInt64($0) << 24) })
        }
        let single = MemoryStore<StableKey, Int>(capacity: 10_000, policy: .wTinyLFU)
        #expect(single.withShard(0) { $0.index.admission.experts.isActive })
    }

    @Test func theOtherShardsTakeTheWindowTheFirstChose() {
        let store = MemoryStore<StableKey, Int>(capacity: 40_000, policy: .wTinyLFU)
        let initial = Self.windows(of: store)
        #expect(initial.allSatisfy { abs($0.share - AdmissionState.initialWindowShare) < 0.001 && !$0.admitsAll })
        // As if the climber had chosen a 40 % window.
        store.withShard(0) { $0.index.admission.adoptWindow(share: 0.4, admitsAll: false) }
        var key = 0
        // Enough sets for the first shard to publish and every other to look, twice over.
        while key < 4 * MemoryStore<StableKey, Int>.setsPerWindowSync * store.shardCount {
            store.set(key, forKey: key)
            key += 1
        }
        #expect(Self.windows(of: store).allSatisfy { abs($0.share - 0.4) < 0.001 && !$0.admitsAll })
        // Admitting everything travels too, and a full store keeps its limits meanwhile.
        store.withShard(0) { $0.index.admission.adoptWindow(share: 0.3, admitsAll: true) }
        for _ in 0..<(40_000 + 4 * MemoryStore<StableKey, Int>.setsPerWindowSync * store.shardCount) {
            store.set(key, forKey: key)
            key += 1
        }
        #expect(Self.windows(of: store).allSatisfy { abs($0.share - 0.3) < 0.001 && $0.admitsAll })
        #expect(store.count == 40_000)
        store.checkInvariants()
    }

    @Test func aRecencyWorkloadGrowsTheWindowOfEveryShard() {
        // Each request is the key of one of the last 8 000 requests or a new one: LRU's workload, in a
        // store of 16 384 entries (two shards). The climber starts at a 1 % window.
        let store = MemoryStore<StableKey, Int>(capacity: 16_384, policy: .wTinyLFU)
        #expect(store.shardCount == 2)
        var generator = SplitMix64(seed: 5)
        var next = 0
        for _ in 0..<400_000 {
            let back = Int(generator.next() % 8_000)
            let key = generator.next() % 3 == 0 || back >= next ? next : next - 1 - back
            if key == next { next += 1 }
            if store.value(forKey: key) == nil { store.set(key, forKey: key) }
        }
        let shares = Self.windows(of: store).map(\.share)
        #expect(shares[0] >= 0.1, "the first shard's window: \(shares[0])")
        #expect(shares.allSatisfy { $0 == shares[0] }, "shares \(shares)")
        store.checkInvariants()
    }
}
