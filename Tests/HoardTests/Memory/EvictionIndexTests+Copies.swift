import HoardTestSupport
import Testing

@testable import Hoard

/// The index's value semantics: a copy and its original change independently, and every payload is
/// released once.
extension EvictionIndexTests {
    @Test(arguments: EvictionPolicy.allCases)
    func aCopyChangesIndependently(policy: EvictionPolicy) {
        var original = EvictionIndex<Int, Int>(policy: policy, capacity: 16)
        for key in 0..<16 { original.upsert(key * 10, forKey: key) }
        for key in [3, 3, 7, 1, 3] { _ = original.access(key) }
        let before = original.entriesInEvictionOrder.map { "\($0.key)=\($0.payload)" }

        var copy = original
        _ = copy.access(0)
        copy.upsert(-1, forKey: 5)
        copy.removeValue(forKey: 7)
        _ = copy.popVictim()
        copy.upsert(160, forKey: 16)

        #expect(original.entriesInEvictionOrder.map { "\($0.key)=\($0.payload)" } == before)
        #expect(original.peek(7) == 70 && original.peek(5) == 50 && !original.contains(16))
        #expect(copy.peek(5) == -1 && !copy.contains(7) && copy.peek(16) == 160)
        original.checkInvariants()
        copy.checkInvariants()
    }

    /// Each change, made first to a copy, must copy the buffers before it writes: the buffers do not
    /// copy on write by themselves (debug builds trap on a write to a shared one).
    @Test(arguments: EvictionPolicy.allCases)
    func everyChangeToACopyLeavesTheOriginalAlone(policy: EvictionPolicy) {
        var original = EvictionIndex<Int, Int>(policy: policy, capacity: 16)
        for key in 0..<16 { original.upsert(key * 10, forKey: key) }
        for key in [3, 3, 7, 1, 3] { _ = original.access(key) }
        let before = original.entriesInEvictionOrder.map { "\($0.key)=\($0.payload)=\($0.count)" }
        let changes: [(String, (inout EvictionIndex<Int, Int>) -> Void)] = [
            ("access", { _ = $0.access(4) }),
            ("upsert of a key it holds", { $0.upsert(-1, forKey: 5) }),
            ("upsert of a new key", { $0.upsert(-1, forKey: 99) }),
            ("removeValue", { $0.removeValue(forKey: 7) }),
            ("popVictim", { _ = $0.popVictim() }),
            ("insert of a new key", { $0.insert(newKey: 97, hash: 97.hashValue, payload: -1) }),
            ("update", { $0.update($0.slot(for: 6, hash: 6.hashValue)!, with: -1, hash: 6.hashValue) }),
            ("replaceVictim", { _ = $0.replaceVictim(withNewKey: 96, hash: 96.hashValue, payload: -1) }),
            ("removeAll", { $0.removeAll() }),
            ("append", { $0.append(-1, forKey: 98, count: 3) }),
        ]
        for (name, change) in changes {
            var copy = original
            change(&copy)
            copy.checkInvariants()
            let after = original.entriesInEvictionOrder.map { "\($0.key)=\($0.payload)=\($0.count)" }
            #expect(after == before, "\(name) changed the original")
            original.checkInvariants()
        }
        // And the other way round: the original changes, the copy keeps what it saw.
        let copy = original
        original.upsert(-1, forKey: 99)
        _ = original.access(2)
        #expect(copy.entriesInEvictionOrder.map { "\($0.key)=\($0.payload)=\($0.count)" } == before)
        copy.checkInvariants()
    }

    @Test(arguments: EvictionPolicy.allCases)
    func releasesEveryPayloadExactlyOnce(policy: EvictionPolicy) {
        let census = Census()
        do {
            var index = EvictionIndex<Int, Counted>(policy: policy, capacity: 32)
            var generator = SplitMix64(seed: 11)
            for _ in 0..<5_000 {
                let key = Int(generator.next() % 64)
                switch generator.next() % 8 {
                case 0: index.removeValue(forKey: key)
                case 1, 2: _ = index.access(key)
                case 3 where generator.next() % 50 == 0: index.removeAll()
                default:
                    if index.contains(key) || index.count < 32 {
                        index.upsert(Counted(census), forKey: key)
                    } else if generator.next() % 2 == 0 {
                        _ = index.popVictim()
                        index.upsert(Counted(census), forKey: key)
                    } else {
                        _ = index.replaceVictim(withNewKey: key, hash: key.hashValue, payload: Counted(census))
                    }
                }
                #expect(census.live == index.count)
            }
            index.checkInvariants()
        }
        #expect(census.live == 0)
    }
}

/// Counts the live instances of `Counted` made with it.
private final class Census {
    var live = 0
}

/// A payload that counts itself in its census while alive.
private final class Counted {
    let census: Census
    init(_ census: Census) {
        self.census = census
        census.live += 1
    }
    deinit { census.live -= 1 }
}
