import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// The CRC-32 that `CRC32.checksum` computes, whichever way it takes (on x86_64 with PCLMULQDQ,
/// the C folding from `CRC32.foldingThreshold` bytes up), against the Swift slicing-by-16
/// alone.
@Suite struct CRC32FoldingTests {
    /// The longest buffer compared; every length up to it is.
    static let maximumLength = 4096

    /// Every length from 0 to 4096 at one start alignment (0 to 15 bytes past a 64-byte boundary),
    /// from a fresh random buffer and seed, matches the slicing-by-16 checksum of the same bytes.
    ///
    /// The expected values continue one another byte by byte (`checksum(n + 1)` is the one of
    /// `checksum(n)` continued with byte `n`), so the reference costs one pass, not one per length.
    @Test(arguments: 0..<16)
    func everyLengthAtAlignment(_ alignment: Int) {
        var generator = SplitMix64(seed: 0xc0de_0000 &+ UInt64(alignment))
        let seed = UInt32.random(in: .min ... .max, using: &generator)
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.maximumLength + 16, alignment: 64)
        defer { storage.deallocate() }
        for index in storage.indices { storage[index] = UInt8.random(in: .min ... .max, using: &generator) }
        let bytes = UnsafeRawBufferPointer(rebasing: storage[alignment..<(alignment + Self.maximumLength)])

        var expected = seed
        var mismatches = 0
        for length in 0...Self.maximumLength {
            if length > 0 {
                expected = CRC32.slicedChecksum(
                    UnsafeRawBufferPointer(rebasing: bytes[(length - 1)..<length]),
                    seed: expected
                )
            }
            let actual = CRC32.checksum(UnsafeRawBufferPointer(rebasing: bytes[..<length]), seed: seed)
            if actual != expected {
                mismatches += 1
                // One report per length would bury the first; a handful says where it starts.
                if mismatches <= 5 { Issue.record("length \(length): \(actual) != \(expected)") }
            }
        }
        #expect(mismatches == 0, "alignment \(alignment)")
    }

    #if canImport(CHoardChecksum) && arch(x86_64) && os(Linux)
    /// The folding is on exactly when the CPU lists PCLMULQDQ and SSE4.1, so that on such a CPU
    /// the test above compares two implementations rather than one with itself.
    @Test func foldingIsOnWhereTheCPUHasIt() throws {
        let info = try String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)
        #expect(CRC32.hasFolding == (info.contains(" pclmulqdq") && info.contains(" sse4_1")))
    }
    #endif
}
