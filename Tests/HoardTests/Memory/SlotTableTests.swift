import HoardTestSupport
import Testing

@testable import Hoard

/// The eviction index's hash table, against a dictionary, with tags chosen to collide.
@Suite struct SlotTableTests {
    /// Finds the slot stored under `tag`, as the index does: a cell whose tag bits match is checked
    /// against the full tag in `tags` (the index compares keys there).
    func find(_ table: SlotTable, tag: UInt32, tags: NodeBuffer<UInt32>) -> Int32? {
        var probe = table.home(tag)
        while table.cells[probe] != 0 {
            let cell = table.cells[probe]
            if table.cell(cell, mayHold: tag), tags[Int(table.slot(of: cell))] == tag { return table.slot(of: cell) }
            probe = (probe + 1) & table.mask
        }
        return nil
    }

    /// Inserts, removes and grows as the index does: slots are dense, and a removal moves the last
    /// slot into the hole.
    @Test(arguments: [1, 7, 1 << 12])
    func matchesADictionaryThroughInsertsMovesRemovalsAndGrowth(spread: Int) {
        var table = SlotTable(capacity: 4)
        var tags = NodeBuffer<UInt32>()
        var model: [UInt32: Int32] = [:]
        var generator = SplitMix64(seed: UInt64(spread))
        // Few distinct homes when `spread` is small: long probe runs wrapping around the table. The
        // high bits vary, so cells of one home differ in the tag bits they keep, or only in the slot.
        func randomTag() -> UInt32 {
            UInt32(generator.next() % UInt64(spread)) | UInt32(generator.next() % 4_096) << 20
        }
        for _ in 0..<20_000 {
            let tag = randomTag()
            if generator.next() % 5 < 3 {
                guard model[tag] == nil else { continue }
                let slot = Int32(tags.count)
                tags.append(tag)
                table.insert(tag: tag, slot: slot, tags: tags)
                model[tag] = slot
            } else if let slot = model[tag] {
                table.remove(tag: tag, slot: slot, tags: tags)
                model[tag] = nil
                let last = Int32(tags.count - 1)
                if slot != last {
                    let movedTag = tags[Int(last)]
                    tags[Int(slot)] = movedTag
                    table.move(tag: movedTag, from: last, to: slot)
                    model[movedTag] = slot
                }
                tags.removeLast()
            }
            #expect(table.count == model.count)
            #expect(table.count * 4 <= table.cells.count * 3)
        }
        #expect(model.count > 1_000)
        for (tag, slot) in model { #expect(find(table, tag: tag, tags: tags) == slot) }
        #expect(table.cells.filter { $0 != 0 }.count == model.count)
        table.removeAll()
        #expect(table.count == 0)
        #expect(table.cells.allSatisfy { $0 == 0 })
    }

    @Test func slotsAndTagBitsSurviveTheirPacking() {
        let small = SlotTable(capacity: 4)
        let large = SlotTable(capacity: 1_000_000)
        for table in [small, large] {
            let largestSlot = Int32((table.mask + 1) / 4 * 3 - 1)
            for (tag, slot) in [(UInt32.max, largestSlot), (0, 0), (12_345_678, largestSlot / 2)] {
                let cell = table.cell(tag: tag, slot: slot)
                #expect(cell != 0)
                #expect(table.slot(of: cell) == slot)
                #expect(table.cell(cell, mayHold: tag))
                // A tag that differs in a bit the cell keeps is told apart; one that differs only in
                // its home bits is not (the index compares keys then).
                #expect(!table.cell(cell, mayHold: tag ^ 0x8000_0000))
                #expect(table.cell(cell, mayHold: tag ^ 1))
            }
        }
        // A million entries keep 11 tag bits: one probe in 2 048 that is not the key reads a node.
        #expect((~large.slotMask).nonzeroBitCount == 11)
    }
}
