import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// The SHA-256 that `SHA256Digest.hash` computes, whichever way it takes (on x86_64 with the SHA
/// extensions, the C compression of `CHoardChecksum`), against the Swift compression alone
/// (`SHA256Digest.portableHash`).
@Suite struct SHA256ExtensionsTests {
    /// The longest buffer of ``everyLengthAtAlignment(_:)``; every length up to it is compared.
    static let maximumLength = 1100

    /// Every length from 0 to 1100 bytes at one start alignment (0 to 15 bytes past a 64-byte
    /// boundary), from a fresh random buffer, hashes as the Swift compression hashes it: every
    /// tail length, the one- and two-block padding cases, and up to seventeen full blocks.
    ///
    /// Each message ends where its allocation ends, so that a read past its end is one that
    /// AddressSanitizer reports.
    @Test(arguments: 0..<16)
    func everyLengthAtAlignment(_ alignment: Int) {
        var generator = SplitMix64(seed: 0x5a_0000 &+ UInt64(alignment))
        var mismatches = 0
        for length in 0...Self.maximumLength {
            let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: alignment + length, alignment: 64)
            defer { storage.deallocate() }
            for index in storage.indices { storage[index] = UInt8.random(in: .min ... .max, using: &generator) }
            let message = UnsafeRawBufferPointer(rebasing: storage[alignment...])
            let actual = SHA256Digest.hash(message)
            let expected = SHA256Digest.portableHash(message)
            if actual != expected {
                mismatches += 1
                // One report per length would bury the first; a handful says where it starts.
                if mismatches <= 5 { Issue.record("length \(length): \(actual.hex) != \(expected.hex)") }
            }
        }
        #expect(mismatches == 0, "alignment \(alignment)")
    }

    /// Eight random lengths up to 64 KiB at one start alignment (0 to 15 bytes past a 64-byte
    /// boundary) hash as the Swift compression hashes them: long runs of blocks in one C call.
    @Test(arguments: 0..<16)
    func randomLongLengthsAtAlignment(_ alignment: Int) {
        let maximumLength = 64 * 1024
        var generator = SplitMix64(seed: 0x5a_1000 &+ UInt64(alignment))
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: maximumLength + 16, alignment: 64)
        defer { storage.deallocate() }
        for index in storage.indices { storage[index] = UInt8.random(in: .min ... .max, using: &generator) }

        // The longest length always, so that one message spans the whole 64 KiB.
        let lengths = [maximumLength] + (0..<7).map { _ in Int.random(in: 0...maximumLength, using: &generator) }
        for length in lengths {
            let message = UnsafeRawBufferPointer(rebasing: storage[alignment..<(alignment + length)])
            let actual = SHA256Digest.hash(message)
            let expected = SHA256Digest.portableHash(message)
            #expect(actual == expected, "alignment \(alignment), length \(length)")
        }
    }

    /// The Swift compression alone gives the published digests too, now that ``SHA256Tests``
    /// may check the SHA extensions instead.
    @Test(arguments: SHA256Tests.nistVectors + SHA256Tests.repeatedAVectors + SHA256Tests.patternVectors)
    func portableHashMatchesVector(_ vector: SHA256Tests.Vector) {
        let digest = vector.message.withUnsafeBytes { SHA256Digest.portableHash($0) }
        #expect(digest.hex == vector.expectedHex)
    }

    /// The empty message without a base address, which neither path may read.
    @Test func emptyBufferWithoutBaseAddress() {
        let empty = UnsafeRawBufferPointer(start: nil, count: 0)
        #expect(SHA256Digest.hash(empty) == SHA256Digest.portableHash(empty))
        #expect(SHA256Digest.hash(empty).hex == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    #if canImport(CHoardChecksum) && arch(x86_64) && os(Linux)
    /// The SHA extensions are used exactly when the CPU lists them and SSSE3, so that on such a
    /// CPU the tests above compare two implementations rather than one with itself.
    @Test func extensionsAreOnWhereTheCPUHasThem() throws {
        let info = try String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)
        #expect(SHA256Digest.hasSHAExtensions == (info.contains(" sha_ni") && info.contains(" ssse3")))
    }
    #endif
}
