import HoardTestSupport
import Testing

@testable import Hoard

/// The eviction index's hash table, against a dictionary, with tags chosen to collide.
@Suite struct SlotTableTests {
    /// Finds the slot stored under `tag`, as the index does (here every tag is unique).
    func find(_ table: SlotTable, tag: UInt32) -> Int32? {
        var probe = table.home(tag)
        while table.cells[probe] != 0 {
            if SlotTable.tag(of: table.cells[probe]) == tag { return SlotTable.slot(of: table.cells[probe]) }
            probe = (probe + 1) & table.mask
        }
        return nil
    }

    @Test(arguments: [1, 7, 1 << 12])
    func matchesADictionaryThroughInsertsMovesRemovalsAndGrowth(spread: Int) {
        var table = SlotTable(capacity: 4)
        var model: [UInt32: Int32] = [:]
        var generator = SplitMix64(seed: UInt64(spread))
        // Few distinct homes when `spread` is small: long probe runs wrapping around the table.
        func randomTag() -> UInt32 { UInt32(generator.next() % UInt64(spread)) | UInt32(generator.next() % 64) << 20 }
        for step in 0..<20_000 {
            let tag = randomTag()
            switch generator.next() % 3 {
            case 0 where model[tag] == nil:
                table.insert(tag: tag, slot: Int32(step))
                model[tag] = Int32(step)
            case 1:
                if let slot = model[tag] {
                    table.remove(tag: tag, slot: slot)
                    model[tag] = nil
                }
            default:
                if let slot = model[tag] {
                    table.move(tag: tag, from: slot, to: slot + 1_000_000)
                    model[tag] = slot + 1_000_000
                }
            }
            #expect(table.count == model.count)
            #expect(table.count * 4 <= table.cells.count * 3)
        }
        for (tag, slot) in model { #expect(find(table, tag: tag) == slot) }
        #expect(table.cells.filter { $0 != 0 }.count == model.count)
        table.removeAll()
        #expect(table.count == 0)
        #expect(table.cells.allSatisfy { $0 == 0 })
    }

    @Test func slotsAndTagsSurviveTheirPacking() {
        for (tag, slot) in [(UInt32.max, Int32.max - 1), (0, 0), (12_345, 67_890)] {
            let cell = SlotTable.cell(tag: tag, slot: slot)
            #expect(cell != 0)
            #expect(SlotTable.tag(of: cell) == tag)
            #expect(SlotTable.slot(of: cell) == slot)
        }
    }
}
