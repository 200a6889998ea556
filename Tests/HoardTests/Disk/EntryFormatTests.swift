import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

@Suite struct EntryFormatTests {
    private let sample = EntryFormat.encode(
        key: "user/42 ✓",
        payload: Data("{\"name\":\"Ada\"}".utf8),
        schemaVersion: 3,
        expiresAt: .at(1_700_000_000.5)
    )

    @Test func roundTripsEveryField() throws {
        let entry = try EntryFormat.decode(sample)
        #expect(entry.key == "user/42 ✓")
        #expect(entry.payload == Data("{\"name\":\"Ada\"}".utf8))
        #expect(entry.schemaVersion == 3)
        #expect(entry.expiresAt == .at(1_700_000_000.5))
        let plain = try EntryFormat.decode(
            EntryFormat.encode(key: "", payload: Data(), schemaVersion: 0, expiresAt: .never)
        )
        #expect(plain.key == "")
        #expect(plain.payload.isEmpty)
        #expect(plain.expiresAt == .never)
    }

    @Test func theLayoutIsTheDocumentedOne() {
        #expect(Array(sample.prefix(4)) == Array("HRDE".utf8))
        #expect(sample.count == EntryFormat.headerSize + "user/42 ✓".utf8.count + 14 + EntryFormat.trailerSize)
    }

    @Test func everyFlippedByteIsDetected() {
        for offset in sample.indices {
            var damaged = sample
            damaged[offset] ^= 0x41
            #expect(throws: EntryFormat.Damage.self, "offset \(offset)") { try EntryFormat.decode(damaged) }
        }
    }

    @Test func everyTruncationAndPaddingIsDetected() {
        for length in 0..<sample.count {
            #expect(throws: EntryFormat.Damage.self) { try EntryFormat.decode(Array(sample.prefix(length))) }
        }
        #expect(throws: EntryFormat.Damage.self) { try EntryFormat.decode(sample + [0]) }
    }

    @Test func foreignBytesAreRejected() {
        var generator = SplitMix64(seed: 99)
        for length in [0, 1, 31, 32, 100, 4_096] {
            let garbage = (0..<length).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            #expect(throws: EntryFormat.Damage.self) { try EntryFormat.decode(garbage) }
        }
        #expect(throws: EntryFormat.Damage.self) { try EntryFormat.decode(Array("{\"json\": true}".utf8)) }
    }

    @Test func anInvalidUTF8KeyIsRejectedEvenWithAValidChecksum() {
        var bytes: [UInt8] = Array("HRDE".utf8)
        bytes.appendLittleEndian(EntryFormat.version)
        bytes.appendLittleEndian(UInt16(0))
        bytes.appendLittleEndian(UInt32(0))
        bytes.appendLittleEndian(UInt32(2))
        bytes.appendLittleEndian(UInt32(0))
        bytes.appendLittleEndian(UInt64(0))
        bytes += [0xFF, 0xFE]
        bytes.appendLittleEndian(bytes.withUnsafeBytes { CRC32.checksum($0) })
        #expect(throws: EntryFormat.Damage.self) { try EntryFormat.decode(bytes) }
    }
}
