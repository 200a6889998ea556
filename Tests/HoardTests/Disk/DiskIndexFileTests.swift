import Testing

@testable import Hoard

@Suite struct DiskIndexFileTests {
    @Test func roundTripsAndRejectsDamage() throws {
        let records = (0..<20).map { index in
            DiskIndexFile.Record(
                digest: DiskKey("key \(index)").digest,
                count: UInt32(index + 1),
                info: DiskEntryInfo(size: 100 + index, expiresAt: index.isMultiple(of: 2) ? .never : .at(1e9 + 0.5))
            )
        }
        let bytes = DiskIndexFile.encode(records)
        let decoded = try #require(bytes.withUnsafeBytes { DiskIndexFile.decode($0) })
        #expect(decoded.map(\.info.expiresAt) == records.map(\.info.expiresAt))
        // Records hold no key: 52 bytes each.
        #expect(bytes.count == DiskIndexFile.headerSize + 20 * 52 + 4)
        #expect(decoded.map(\.count) == records.map(\.count))
        #expect(decoded.map(\.info.size) == records.map(\.info.size))
        #expect(decoded.map(\.digest) == records.map(\.digest))
        for offset in stride(from: 0, to: bytes.count, by: 7) {
            var damaged = bytes
            damaged[offset] ^= 0x10
            #expect(damaged.withUnsafeBytes { DiskIndexFile.decode($0) } == nil)
        }
        for length in stride(from: 0, to: bytes.count, by: 5) {
            #expect(Array(bytes.prefix(length)).withUnsafeBytes { DiskIndexFile.decode($0) } == nil)
        }
    }

    @Test func aVersion3SnapshotIsOpenedWithoutItsKeysAndNothingElseIs() throws {
        // Version 3: the same records, each followed by its key's length and key.
        let keys = ["a", "caf\u{E9}", ""]
        var bytes = DiskIndexFile.magic
        bytes.appendLittleEndian(DiskIndexFile.keyedVersion)
        bytes.appendLittleEndian(UInt16(0))
        bytes.appendLittleEndian(UInt32(keys.count))
        for (number, key) in keys.enumerated() {
            DiskKey(key).digest.appendRawBytes(to: &bytes)
            bytes.appendLittleEndian(UInt32(number + 1))
            bytes.appendLittleEndian(UInt64(100 + number))
            bytes.appendLittleEndian((number == 1 ? 1e9 : Double.infinity).bitPattern)
            bytes.appendLittleEndian(UInt32(key.utf8.count))
            bytes.append(contentsOf: key.utf8)
        }
        bytes.appendLittleEndian(bytes.withUnsafeBytes { CRC32.checksum($0) })
        let journal = DiskJournal.encode([.begin, .remove(digest: DiskKey("a").digest, key: nil), .commit])
        let file = bytes + journal
        let snapshot = try #require(file.withUnsafeBytes { DiskIndexFile.decodeOpenableSnapshot($0) })
        #expect(snapshot.end == bytes.count)
        #expect(snapshot.records.map(\.digest) == keys.map { DiskKey($0).digest })
        #expect(snapshot.records.map(\.count) == [1, 2, 3])
        #expect(snapshot.records.map(\.info.size) == [100, 101, 102])
        #expect(snapshot.records.map(\.info.expiresAt) == [.never, .at(1e9), .never])
        // Not this version's layout: the strict decoder refuses it.
        #expect(file.withUnsafeBytes { DiskIndexFile.decodeSnapshot($0) } == nil)
        // Another version (the journal-less version 2 is only a hint for a rebuild) is not opened from.
        var other = bytes
        other[4] = 2
        #expect(other.withUnsafeBytes { DiskIndexFile.decodeOpenableSnapshot($0) } == nil)
    }
}
