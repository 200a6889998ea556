import Testing

@testable import Hoard

@Suite struct DiskIndexFileTests {
    @Test func roundTripsAndRejectsDamage() throws {
        let records = (0..<20).map { index in
            DiskIndexFile.Record(
                digest: DiskKey("key \(index)").digest,
                count: UInt32(index + 1),
                info: DiskEntryInfo(key: "key \(index)", size: 100 + index)
            )
        }
        let bytes = DiskIndexFile.encode(records)
        let decoded = try #require(bytes.withUnsafeBytes { DiskIndexFile.decode($0) })
        #expect(decoded.map(\.info.key) == records.map(\.info.key))
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
}
