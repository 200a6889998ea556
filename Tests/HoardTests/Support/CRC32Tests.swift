import HoardTestSupport
import Testing

@testable import Hoard

/// Tests for `CRC32`: check value, zlib agreement, tail handling and seed continuation.
@Suite struct CRC32Tests {
    /// A bit-at-a-time CRC-32/ISO-HDLC, written independently of the table-driven implementation.
    ///
    /// - Parameters:
    ///   - bytes: The bytes to checksum.
    ///   - seed: The checksum of the preceding bytes, or 0.
    /// - Returns: The checksum.
    static func referenceChecksum(_ bytes: some Sequence<UInt8>, seed: UInt32 = 0) -> UInt32 {
        var crc = ~seed
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 {
                crc = (crc >> 1) ^ (0xedb8_8320 & (0 &- (crc & 1)))
            }
        }
        return ~crc
    }

    /// Returns `count` pseudo-random bytes.
    ///
    /// - Parameters:
    ///   - count: The number of bytes.
    ///   - generator: The source of randomness.
    /// - Returns: The bytes.
    static func randomBytes(count: Int, using generator: inout SplitMix64) -> [UInt8] {
        (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }

    /// The standard check value: CRC-32 of `"123456789"` is `0xCBF43926`.
    @Test func checkValue() {
        #expect(CRC32.checksum(Array("123456789".utf8)) == 0xcbf4_3926)
        #expect(CRC32.checksum("123456789".utf8) == 0xcbf4_3926)
        #expect(Self.referenceChecksum("123456789".utf8) == 0xcbf4_3926)
    }

    /// The empty input has checksum 0, and continuing with no bytes keeps the seed.
    @Test func emptyInput() {
        #expect(CRC32.checksum([UInt8]()) == 0)
        #expect(CRC32.checksum(UnsafeRawBufferPointer(start: nil, count: 0)) == 0)
        #expect(CRC32.checksum([UInt8](), seed: 0xdead_beef) == 0xdead_beef)
        #expect(CRC32.checksum(UnsafeRawBufferPointer(start: nil, count: 0), seed: 0x1234_5678) == 0x1234_5678)
    }

    /// A byte string and its checksum as computed by Python's `zlib.crc32`.
    struct ZlibVector: Sendable, CustomTestStringConvertible {
        /// A short label used in test output.
        let name: String
        /// The bytes to checksum.
        let bytes: [UInt8]
        /// The value `zlib.crc32(bytes)` returns.
        let expected: UInt32

        /// The label shown by Swift Testing for this argument.
        var testDescription: String { name }
    }

    /// Vectors whose expected values come from `python3 -c 'import zlib; print(hex(zlib.crc32(...)))'`.
    static let zlibVectors: [ZlibVector] = [
        ZlibVector(name: "empty", bytes: [], expected: 0x0000_0000),
        ZlibVector(name: "a", bytes: Array("a".utf8), expected: 0xe8b7_be43),
        ZlibVector(name: "abc", bytes: Array("abc".utf8), expected: 0x3524_41c2),
        ZlibVector(name: "123456789", bytes: Array("123456789".utf8), expected: 0xcbf4_3926),
        ZlibVector(
            name: "quick brown fox",
            bytes: Array("The quick brown fox jumps over the lazy dog".utf8),
            expected: 0x414f_a339
        ),
        ZlibVector(name: "bytes 0...255", bytes: (0..<256).map { UInt8($0) }, expected: 0x2905_8c73),
        ZlibVector(name: "32 × 0x00", bytes: [UInt8](repeating: 0x00, count: 32), expected: 0x190a_55ad),
        ZlibVector(name: "32 × 0xff", bytes: [UInt8](repeating: 0xff, count: 32), expected: 0xff6c_ab0b),
        ZlibVector(
            name: "200 × hoard",
            bytes: Array(String(repeating: "hoard", count: 200).utf8),
            expected: 0x0744_944e
        ),
    ]

    /// Results agree with Python's `zlib.crc32` on hard-coded vectors.
    @Test(arguments: zlibVectors)
    func matchesZlib(_ vector: ZlibVector) {
        #expect(CRC32.checksum(vector.bytes) == vector.expected)
        #expect(vector.bytes.withUnsafeBytes { CRC32.checksum($0) } == vector.expected)
        #expect(Self.referenceChecksum(vector.bytes) == vector.expected)
    }

    /// Buffers of every length from 0 to 33 (two sixteen-byte steps and every tail), at every start alignment, match the bitwise reference.
    @Test(arguments: 0...33)
    func tailHandling(length: Int) {
        var generator = SplitMix64(seed: UInt64(length) &* 0x1000_0001)
        let storage = Self.randomBytes(count: length + 8, using: &generator)
        for offset in 0..<8 {
            let slice = storage[offset..<(offset + length)]
            let expected = Self.referenceChecksum(slice)
            #expect(CRC32.checksum(slice) == expected, "offset \(offset)")
            let viaBuffer = storage.withUnsafeBytes { buffer in
                CRC32.checksum(UnsafeRawBufferPointer(rebasing: buffer[offset..<(offset + length)]))
            }
            #expect(viaBuffer == expected, "offset \(offset)")
            #expect(CRC32.checksum(slice, seed: 0x0bad_f00d) == Self.referenceChecksum(slice, seed: 0x0bad_f00d))
        }
    }

    /// Larger random buffers match the bitwise reference.
    @Test(arguments: [63, 64, 1000, 1024, 4097])
    func largeBuffersMatchReference(length: Int) {
        var generator = SplitMix64(seed: UInt64(length))
        let bytes = Self.randomBytes(count: length, using: &generator)
        #expect(CRC32.checksum(bytes) == Self.referenceChecksum(bytes))
    }

    /// `checksum(a + b) == checksum(b, seed: checksum(a))` for random data split at random points.
    @Test func seedContinuationOnRandomSplits() {
        var generator = SplitMix64(seed: 0x00c0_ffee)
        for _ in 0..<200 {
            let length = Int.random(in: 0...600, using: &generator)
            let bytes = Self.randomBytes(count: length, using: &generator)
            let whole = CRC32.checksum(bytes)

            let split = Int.random(in: 0...length, using: &generator)
            let head = CRC32.checksum(bytes[..<split])
            #expect(CRC32.checksum(bytes[split...], seed: head) == whole, "length \(length), split \(split)")

            // Several pieces, continued one after another.
            var cuts = (0..<Int.random(in: 1...6, using: &generator)).map { _ in
                Int.random(in: 0...length, using: &generator)
            }
            cuts.sort()
            var crc: UInt32 = 0
            var start = 0
            for cut in cuts + [length] {
                crc = CRC32.checksum(bytes[start..<cut], seed: crc)
                start = cut
            }
            #expect(crc == whole, "length \(length), cuts \(cuts)")
        }
    }

    /// Non-contiguous collections take the copying fallback and give the same result.
    @Test func nonContiguousCollection() {
        let bytes = (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        let expected = CRC32.checksum(bytes)
        #expect(CRC32.checksum(bytes.lazy.map { $0 }) == expected)
        #expect(CRC32.checksum(bytes.lazy.map { $0 }, seed: 7) == CRC32.checksum(bytes, seed: 7))
        #expect(CRC32.checksum(ContiguousArray(bytes)) == expected)
    }
}
