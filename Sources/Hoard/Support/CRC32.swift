/// The CRC-32 checksum used by zlib, gzip, PNG and Ethernet (CRC-32/ISO-HDLC).
///
/// Parameters: reflected polynomial `0xEDB88320`, initial value `0xFFFFFFFF`,
/// final XOR `0xFFFFFFFF`. The check value of the ASCII string `"123456789"` is
/// `0xCBF43926`, and results match Python's `zlib.crc32`.
///
/// Checksums can be continued: for any byte sequences `a` and `b`,
/// `checksum(a + b) == checksum(b, seed: checksum(a))`. The empty input has
/// checksum 0, so a seed of 0 starts a fresh computation.
///
/// The implementation uses slicing-by-8: eight bytes are folded in per step
/// using eight 256-entry lookup tables, which are built once per process.
enum CRC32 {
    /// Computes, or continues, the CRC-32 of the bytes in a raw buffer.
    ///
    /// - Parameters:
    ///   - buffer: The bytes to checksum. It may be empty and may have a `nil`
    ///     base address; no alignment is needed.
    ///   - seed: The checksum of the bytes that precede `buffer`, or 0 (the
    ///     default) to start a new checksum.
    /// - Returns: The checksum of the preceding bytes followed by `buffer`.
    static func checksum(_ buffer: UnsafeRawBufferPointer, seed: UInt32 = 0) -> UInt32 {
        guard let base = buffer.baseAddress, !buffer.isEmpty else { return seed }
        var crc = ~seed
        table.withUnsafeBufferPointer { table in
            var pointer = base
            var remaining = buffer.count
            while remaining >= 8 {
                let chunk = UInt64(littleEndian: pointer.loadUnaligned(as: UInt64.self))
                let low = UInt32(truncatingIfNeeded: chunk) ^ crc
                let high = UInt32(truncatingIfNeeded: chunk &>> 32)
                crc =
                    table[7 &* 256 &+ Int(low & 0xff)]
                    ^ table[6 &* 256 &+ Int((low &>> 8) & 0xff)]
                    ^ table[5 &* 256 &+ Int((low &>> 16) & 0xff)]
                    ^ table[4 &* 256 &+ Int(low &>> 24)]
                    ^ table[3 &* 256 &+ Int(high & 0xff)]
                    ^ table[2 &* 256 &+ Int((high &>> 8) & 0xff)]
                    ^ table[1 &* 256 &+ Int((high &>> 16) & 0xff)]
                    ^ table[Int(high &>> 24)]
                pointer += 8
                remaining &-= 8
            }
            while remaining > 0 {
                let byte = pointer.load(as: UInt8.self)
                crc = table[Int((crc ^ UInt32(byte)) & 0xff)] ^ (crc &>> 8)
                pointer += 1
                remaining &-= 1
            }
        }
        return ~crc
    }

    /// Computes, or continues, the CRC-32 of a collection of bytes.
    ///
    /// Contiguous collections (`[UInt8]`, `ArraySlice<UInt8>`, `Data`, the
    /// UTF-8 view of a native `String`, …) are read in place; other
    /// collections are first copied into a temporary array.
    ///
    /// - Parameters:
    ///   - bytes: The bytes to checksum.
    ///   - seed: The checksum of the bytes that precede `bytes`, or 0 (the
    ///     default) to start a new checksum.
    /// - Returns: The checksum of the preceding bytes followed by `bytes`.
    static func checksum<Bytes: Collection>(_ bytes: Bytes, seed: UInt32 = 0) -> UInt32 where Bytes.Element == UInt8 {
        if let crc = bytes.withContiguousStorageIfAvailable({ checksum(UnsafeRawBufferPointer($0), seed: seed) }) {
            return crc
        }
        return Array(bytes).withUnsafeBytes { checksum($0, seed: seed) }
    }

    /// The slicing-by-8 lookup tables, stored back to back (8 × 256 entries).
    ///
    /// Slice 0 is the classic bytewise table: entry `i` is the CRC register
    /// after shifting byte `i` through eight reflected polynomial steps.
    /// Entry `i` of slice `k` is the effect of byte `i` followed by `k` zero
    /// bytes, so eight table reads process eight input bytes at once.
    private static let table: [UInt32] = {
        let polynomial: UInt32 = 0xedb8_8320
        var table = [UInt32](repeating: 0, count: 8 * 256)
        for index in 0..<256 {
            var crc = UInt32(index)
            for _ in 0..<8 {
                crc = crc & 1 == 1 ? (crc >> 1) ^ polynomial : crc >> 1
            }
            table[index] = crc
        }
        for slice in 1..<8 {
            for index in 0..<256 {
                let previous = table[(slice - 1) * 256 + index]
                table[slice * 256 + index] = (previous >> 8) ^ table[Int(previous & 0xff)]
            }
        }
        return table
    }()
}
