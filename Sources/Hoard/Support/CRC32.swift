#if canImport(CHoardChecksum) && arch(x86_64)
import CHoardChecksum
#endif

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
/// The implementation uses slicing-by-16: sixteen bytes are folded in per step
/// using sixteen 256-entry lookup tables, which are built once per process. On
/// x86_64 CPUs with carry-less multiplication (PCLMULQDQ), buffers of at least
/// ``foldingThreshold`` bytes are folded by the `CHoardChecksum` C target
/// instead, several times faster; the tables finish the folded 16 bytes.
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
        #if canImport(CHoardChecksum) && arch(x86_64)
        if buffer.count >= foldingThreshold, hasFolding, let base = buffer.baseAddress {
            // The folded 16 bytes have the CRC remainder of the seed and the whole buffer: their
            // checksum from a zero register (seed 0xFFFFFFFF) is the buffer's.
            var folded: (UInt64, UInt64) = (0, 0)
            withUnsafeMutableBytes(of: &folded) { folded in
                hoard_crc32_fold(base, buffer.count, seed, folded.baseAddress?.assumingMemoryBound(to: UInt8.self))
            }
            return withUnsafeBytes(of: folded) { slicedChecksum($0, seed: 0xffff_ffff) }
        }
        #endif
        return slicedChecksum(buffer, seed: seed)
    }

    #if canImport(CHoardChecksum) && arch(x86_64)
    /// The smallest buffer folded in C.
    ///
    /// Below it the call, the start-up of four chunks and the finishing table step cost what
    /// they save: measured, the tables alone win at 64 and 100 bytes (~14 vs ~16 ns, ~27 vs
    /// ~30 ns) and lose from 128 (~38 vs ~26 ns; 1100 bytes: ~230 vs ~80 ns).
    static var foldingThreshold: Int { 128 }

    /// Whether this CPU can fold (PCLMULQDQ and SSE4.1), asked once per process.
    static let hasFolding = hoard_crc32_fold_available() != 0
    #endif

    /// Computes, or continues, the CRC-32 of the bytes in a raw buffer with the
    /// slicing-by-16 tables alone, whatever the CPU (the tests compare the folding with it).
    ///
    /// - Parameters:
    ///   - buffer: The bytes to checksum. It may be empty and may have a `nil`
    ///     base address; no alignment is needed.
    ///   - seed: The checksum of the bytes that precede `buffer`, or 0 to start
    ///     a new checksum.
    /// - Returns: The checksum of the preceding bytes followed by `buffer`.
    static func slicedChecksum(_ buffer: UnsafeRawBufferPointer, seed: UInt32) -> UInt32 {
        guard let base = buffer.baseAddress, !buffer.isEmpty else { return seed }
        // The register stays a local of the closure: captured from outside, it went through memory
        // at every step, which put a store and a load in the chain each step waits on.
        let crc = table.withUnsafeBufferPointer { table in
            var crc = ~seed
            var pointer = base
            var remaining = buffer.count
            // Sixteen bytes a step. Only the first four table reads wait on the register; the other
            // twelve are folded first, so that they are ready before the register is.
            while remaining >= 16 {
                let first = UInt64(littleEndian: pointer.loadUnaligned(as: UInt64.self))
                let second = UInt64(littleEndian: pointer.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
                let high = UInt32(truncatingIfNeeded: first &>> 32)
                let third = UInt32(truncatingIfNeeded: second)
                let fourth = UInt32(truncatingIfNeeded: second &>> 32)
                var rest =
                    table[11 &* 256 &+ Int(high & 0xff)]
                    ^ table[10 &* 256 &+ Int((high &>> 8) & 0xff)]
                    ^ table[9 &* 256 &+ Int((high &>> 16) & 0xff)]
                    ^ table[8 &* 256 &+ Int(high &>> 24)]
                rest ^=
                    table[7 &* 256 &+ Int(third & 0xff)]
                    ^ table[6 &* 256 &+ Int((third &>> 8) & 0xff)]
                    ^ table[5 &* 256 &+ Int((third &>> 16) & 0xff)]
                    ^ table[4 &* 256 &+ Int(third &>> 24)]
                rest ^=
                    table[3 &* 256 &+ Int(fourth & 0xff)]
                    ^ table[2 &* 256 &+ Int((fourth &>> 8) & 0xff)]
                    ^ table[1 &* 256 &+ Int((fourth &>> 16) & 0xff)]
                    ^ table[Int(fourth &>> 24)]
                let low = UInt32(truncatingIfNeeded: first) ^ crc
                crc =
                    rest ^ table[15 &* 256 &+ Int(low & 0xff)]
                    ^ table[14 &* 256 &+ Int((low &>> 8) & 0xff)]
                    ^ table[13 &* 256 &+ Int((low &>> 16) & 0xff)]
                    ^ table[12 &* 256 &+ Int(low &>> 24)]
                pointer += 16
                remaining &-= 16
            }
            while remaining > 0 {
                let byte = pointer.load(as: UInt8.self)
                crc = table[Int((crc ^ UInt32(byte)) & 0xff)] ^ (crc &>> 8)
                pointer += 1
                remaining &-= 1
            }
            return crc
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

    /// The slicing-by-16 lookup tables, stored back to back (16 × 256 entries).
    ///
    /// Slice 0 is the classic bytewise table: entry `i` is the CRC register
    /// after shifting byte `i` through eight reflected polynomial steps.
    /// Entry `i` of slice `k` is the effect of byte `i` followed by `k` zero
    /// bytes, so sixteen table reads process sixteen input bytes at once.
    private static let table: [UInt32] = {
        let polynomial: UInt32 = 0xedb8_8320
        var table = [UInt32](repeating: 0, count: 16 * 256)
        for index in 0..<256 {
            var crc = UInt32(index)
            for _ in 0..<8 {
                crc = crc & 1 == 1 ? (crc >> 1) ^ polynomial : crc >> 1
            }
            table[index] = crc
        }
        for slice in 1..<16 {
            for index in 0..<256 {
                let previous = table[(slice - 1) * 256 + index]
                table[slice * 256 + index] = (previous >> 8) ^ table[Int(previous & 0xff)]
            }
        }
        return table
    }()
}
