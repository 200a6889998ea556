import Foundation
import Testing

@testable import Hoard

/// Numbers read from disk or from the system that do not fit a 32-bit `Int` (watchOS on arm64_32),
/// or a signed `dev_t` (Apple platforms): each path takes them without trapping.
@Suite struct IntegerWidthTests {
    /// An entry header whose key and payload lengths are `keyLength` and `payloadLength`.
    private func entryHeader(keyLength: UInt32, payloadLength: UInt32) -> [UInt8] {
        var bytes = EntryFormat.magic
        bytes.appendLittleEndian(EntryFormat.version)
        bytes.appendLittleEndian(UInt16(0))
        bytes.appendLittleEndian(UInt32(0))
        bytes.appendLittleEndian(keyLength)
        bytes.appendLittleEndian(payloadLength)
        bytes.appendLittleEndian(UInt64(0))
        bytes += [UInt8](repeating: 0, count: 8)
        return bytes
    }

    @Test func anEntryWithLengthsBeyondInt32MaxIsDamageNotATrap() {
        let beyond = UInt32(Int32.max) + 1
        let lengths: [(UInt32, UInt32)] = [(.max, .max), (beyond, 0), (0, beyond), (.max, 0), (beyond, beyond)]
        for (keyLength, payloadLength) in lengths {
            let bytes = entryHeader(keyLength: keyLength, payloadLength: payloadLength)
            #expect(throws: EntryFormat.Damage.self) { try EntryFormat.decode(bytes) }
        }
    }

    @Test func anIndexWithACountOrKeyLengthBeyondInt32MaxIsRejected() {
        for (count, keyLength) in [
            (UInt32.max, UInt32(1)), (UInt32(1), UInt32.max), (UInt32(1), UInt32(Int32.max) + 1),
        ] {
            var bytes = DiskIndexFile.magic
            bytes.appendLittleEndian(DiskIndexFile.version)
            bytes.appendLittleEndian(UInt16(0))
            bytes.appendLittleEndian(count)
            bytes += [UInt8](repeating: 7, count: 32)  // a digest
            bytes.appendLittleEndian(UInt32(1))  // accesses
            bytes.appendLittleEndian(UInt64.max)  // size: beyond Int.max too
            bytes.appendLittleEndian(Double.infinity.bitPattern)
            bytes.appendLittleEndian(keyLength)
            let checksum = bytes.withUnsafeBytes { CRC32.checksum($0) }
            bytes.appendLittleEndian(checksum)
            #expect(bytes.withUnsafeBytes { DiskIndexFile.decode($0) } == nil)
        }
    }

    @Test func aTagBeyondInt32MaxHasAHomeInsideTheTable() {
        let table = SlotTable(capacity: 1_000)
        for tag in [UInt32.max, UInt32(Int32.max) + 1, UInt32(Int32.max), 0] {
            #expect((0...table.mask).contains(table.home(tag)))
        }
    }

    @Test func aNegativeDeviceNumberIsItsBitPattern() {
        let hold = ContainerLock.Hold(device: Int32(-1), inode: Int32(-2))
        #expect(hold.device == UInt64(bitPattern: -1))
        #expect(hold.inode == UInt64(bitPattern: -2))
        #expect(ContainerLock.Hold(device: UInt64.max, inode: UInt64(7)).device == UInt64.max)
    }

    @Test func aVersionOutsideTheStoredRangeIsRefusedAndItsEdgeAccepted() throws {
        let folder = TemporaryDirectory()
        #expect(throws: CacheError.invalidConfiguration) { try folder.stringBuilder().version(-1).build() }
        if Int.bitWidth == 64 {
            #expect(throws: CacheError.invalidConfiguration) {
                try folder.stringBuilder().version(Int(UInt32.max) + 1).build()
            }
            _ = try folder.stringBuilder().version(Int(UInt32.max)).build()
        }
    }
}
