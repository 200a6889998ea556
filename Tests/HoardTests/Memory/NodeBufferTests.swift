import HoardTestSupport
import Testing

@testable import Hoard

/// Counts its live instances, so that a test can see every element released exactly once.
private final class Tracked {
    nonisolated(unsafe) static var live = 0
    let value: Int
    init(_ value: Int) {
        self.value = value
        Tracked.live += 1
    }
    deinit { Tracked.live -= 1 }
}

@Suite(.serialized)
struct NodeBufferTests {
    @Test func elementsStartOnAMemoryLine() {
        var buffer = NodeBuffer<(Int, Int, Int, Int, Int, Int, Int, Int)>()
        for capacity in [1, 16, 1_000, 100_000] {
            buffer.reserveCapacity(capacity)
            let address = UInt(bitPattern: buffer.storage.base)
            #expect(address % 64 == 0, "capacity \(capacity): \(address % 64) bytes into a line")
        }
    }

    @Test func behavesLikeAnArray() {
        var buffer = NodeBuffer<Int>()
        var model: [Int] = []
        var random = SplitMix64(seed: 7)
        for step in 0..<5_000 {
            switch random.next() % 4 {
            case 0, 1:
                buffer.append(step)
                model.append(step)
            case 2 where !model.isEmpty:
                #expect(buffer.removeLast() == model.removeLast())
            case 3 where model.count > 1:
                let i = Int(random.next() % UInt64(model.count))
                let j = Int(random.next() % UInt64(model.count))
                buffer.swapAt(i, j)
                model.swapAt(i, j)
                buffer[i] += 1
                model[i] += 1
            default:
                break
            }
        }
        #expect(Array(buffer) == model)
    }

    @Test func repeatingFillsEveryElement() {
        var words = NodeBuffer<UInt64>(repeating: 7, count: 100)
        #expect(words.count == 100 && (0..<100).allSatisfy { words[$0] == 7 })
        words.withMutableView { view in view[99] = 8 }
        #expect(words[99] == 8 && words[98] == 7)
        #expect(NodeBuffer<UInt64>(repeating: 1, count: 0).isEmpty)
    }

    @Test func makeUniqueGivesACopyItsOwnElements() {
        var original = NodeBuffer<Int>()
        for value in 0..<100 { original.append(value) }
        var copy = original
        #expect(copy.storage === original.storage)
        copy.makeUnique()
        #expect(copy.storage !== original.storage)
        copy[3] = -3
        copy.append(100)
        original.makeUnique()
        original.swapAt(0, 1)
        #expect(original.count == 100 && original[3] == 3 && original[0] == 1)
        #expect(copy.count == 101 && copy[3] == -3 && copy[0] == 0)
    }

    @Test func makeUniqueKeepsStorageNoCopyShares() {
        var buffer = NodeBuffer<Int>()
        for value in 0..<10 { buffer.append(value) }
        // The address, not the storage object: a reference to that would share it.
        let base = buffer.storage.base
        buffer.makeUnique()
        #expect(buffer.storage.base == base)
    }

    @Test func everyWriteAfterMakeUniqueLeavesTheOriginalAlone() {
        var original = NodeBuffer<Int>()
        for value in 0..<10 { original.append(value) }

        var appended = original
        appended.makeUnique()
        appended.append(10)
        var shortened = original
        shortened.makeUnique()
        #expect(shortened.removeLast() == 9)
        var swapped = original
        swapped.makeUnique()
        swapped.swapAt(0, 9)
        var viewed = original
        viewed.makeUnique()
        viewed.withMutableView { view in view[5] = -5 }

        #expect(Array(original) == Array(0..<10))
        #expect(Array(appended) == Array(0...10))
        #expect(Array(shortened) == Array(0..<9))
        #expect(swapped[0] == 9 && swapped[9] == 0)
        #expect(viewed[5] == -5 && viewed.count == 10)
    }

    @Test func releasesEveryElementOnce() {
        Tracked.live = 0
        do {
            var buffer = NodeBuffer<Tracked>()
            for value in 0..<1_000 { buffer.append(Tracked(value)) }
            var copy = buffer
            copy.makeUnique()
            copy.swapAt(0, 999)
            #expect(copy.removeLast().value == 0)
            #expect(Tracked.live == 1_000)
            buffer.removeAll()
            #expect(Tracked.live == 999)
            #expect(copy[0].value == 999)
        }
        #expect(Tracked.live == 0)
    }
}
