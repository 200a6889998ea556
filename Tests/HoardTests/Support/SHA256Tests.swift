import Testing

@testable import Hoard

/// Tests for `SHA256Digest`: FIPS 180-4 vectors, padding boundaries, hex and raw-byte round trips.
@Suite struct SHA256Tests {
    /// A message and its expected SHA-256 digest in lowercase hex.
    struct Vector: Sendable, CustomTestStringConvertible {
        /// A short label used in test output.
        let name: String
        /// The message bytes.
        let message: [UInt8]
        /// The expected digest as 64 lowercase hex characters.
        let expectedHex: String

        /// The label shown by Swift Testing for this argument.
        var testDescription: String { name }

        /// Creates a vector whose message is the UTF-8 encoding of `text`.
        ///
        /// - Parameters:
        ///   - text: The message text.
        ///   - expectedHex: The expected digest.
        init(_ text: String, _ expectedHex: String) {
            self.name = text.count > 24 ? "\(text.prefix(24))… (\(text.utf8.count) bytes)" : "\"\(text)\""
            self.message = Array(text.utf8)
            self.expectedHex = expectedHex
        }

        /// Creates a vector with an explicit message and label.
        ///
        /// - Parameters:
        ///   - name: The label.
        ///   - message: The message bytes.
        ///   - expectedHex: The expected digest.
        init(name: String, message: [UInt8], expectedHex: String) {
            self.name = name
            self.message = message
            self.expectedHex = expectedHex
        }
    }

    /// The short-message vectors published with FIPS 180-4 (and the CAVP examples).
    static let nistVectors: [Vector] = [
        Vector("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        Vector("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        Vector(
            "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        ),
        Vector(
            "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
                + "mnopqrstnopqrstu",
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"
        ),
        Vector(
            "The quick brown fox jumps over the lazy dog",
            "d7a8fbb307d7809469ca9abcb0082e4f8d5651e46d3cdb762d02d0bf37c9e592"
        ),
    ]

    /// Messages of `n` × `"a"` around the one- and two-block padding boundaries.
    ///
    /// Expected values come from `python3 -c 'import hashlib; print(hashlib.sha256(b"a" * n).hexdigest())'`.
    static let repeatedAVectors: [Vector] = [
        (55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"),
        (56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"),
        (63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"),
        (64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"),
        (65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"),
    ].map { count, hex in
        Vector(name: "\(count) × a", message: [UInt8](repeating: UInt8(ascii: "a"), count: count), expectedHex: hex)
    }

    /// Messages of bytes `(7 * i + 3) % 256` around the padding boundaries of one and two blocks.
    ///
    /// Expected values come from
    /// `python3 -c 'import hashlib; print(hashlib.sha256(bytes((i*7+3)%256 for i in range(n))).hexdigest())'`.
    static let patternVectors: [Vector] = [
        (55, "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b"),
        (56, "4324d65f3c103567f5589c710bc08f8523f929a9272e3af36fc968e52abc6c27"),
        (63, "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055"),
        (64, "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241"),
        (65, "aacca6ff74fdbb296d165a45cecfa04e5127bc008770fbbdd48006f2d2fae95e"),
        (119, "9ce7368e4daf32341631b492e80359dc9f594b48453cd0dd5bf0b19279cc177e"),
        (120, "7836b787757e95e58b3ca5aec90b1b004e8deba1e50e9675af9cabf1a13a04b5"),
        (127, "a8d23e75d936f303d248888d9b165ee543f4cbafcad3c9dd2a79bd84faa11d07"),
        (128, "d2742f1f4ac6bb7ca2b239ee18402ba8b3f9f8e652d2a72973c2b9ba11c08cf6"),
    ].map { count, hex in
        Vector(name: "pattern \(count)", message: patternBytes(count: count), expectedHex: hex)
    }

    /// Returns the test pattern `(7 * i + 3) % 256` for `i` in `0..<count`.
    ///
    /// - Parameter count: The number of bytes.
    /// - Returns: The pattern bytes.
    static func patternBytes(count: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
    }

    /// Formats bytes as lowercase hex with a straightforward reference implementation.
    ///
    /// - Parameter bytes: The bytes to format.
    /// - Returns: Two lowercase hex digits per byte.
    static func referenceHex(_ bytes: [UInt8]) -> String {
        bytes.map { byte in
            let digits = String(byte, radix: 16)
            return byte < 16 ? "0" + digits : digits
        }.joined()
    }

    /// The NIST short-message vectors hash to their published digests.
    @Test(arguments: nistVectors)
    func nistVector(_ vector: Vector) {
        #expect(SHA256Digest.hash(vector.message).hex == vector.expectedHex)
    }

    /// Messages at the padding boundaries (55, 56, 63, 64, 65 bytes) hash correctly.
    @Test(arguments: repeatedAVectors + patternVectors)
    func paddingBoundary(_ vector: Vector) {
        #expect(SHA256Digest.hash(vector.message).hex == vector.expectedHex)
    }

    /// The FIPS 180-4 long-message vector: one million repetitions of `"a"`.
    @Test func oneMillionA() {
        let message = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        #expect(
            SHA256Digest.hash(message).hex == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
        )
    }

    /// The digest words are the big-endian reading of the digest bytes.
    @Test func wordLayout() {
        let digest = SHA256Digest.hash(Array("abc".utf8))
        #expect(digest.word0 == 0xba78_16bf_8f01_cfea)
        #expect(digest.word1 == 0x4141_40de_5dae_2223)
        #expect(digest.word2 == 0xb003_61a3_9617_7a9c)
        #expect(digest.word3 == 0xb410_ff61_f200_15ad)
    }

    /// Every way of passing the same bytes gives the same digest, including the non-contiguous fallback.
    @Test(arguments: [0, 1, 20, 55, 56, 64, 65, 200, 1000])
    func inputRepresentationsAgree(count: Int) {
        let bytes = Self.patternBytes(count: count)
        let expected = SHA256Digest.hash(bytes)

        #expect(SHA256Digest.hash(bytes[...]) == expected)
        #expect(SHA256Digest.hash(([0xaa] + bytes + [0xbb]).dropFirst().dropLast()) == expected)
        #expect(bytes.withUnsafeBytes { SHA256Digest.hash($0) } == expected)
        #expect(SHA256Digest.hash(bytes.lazy.map { $0 }) == expected)
        #expect(SHA256Digest.hash(ContiguousArray(bytes)) == expected)

        // Unaligned start address for the raw-buffer fast path.
        let shifted = [0x00] + bytes
        let viaShiftedBuffer = shifted.withUnsafeBytes { buffer in
            SHA256Digest.hash(UnsafeRawBufferPointer(rebasing: buffer.dropFirst()))
        }
        #expect(viaShiftedBuffer == expected)
    }

    /// Strings can be hashed through their UTF-8 views, native or bridged through a substring.
    @Test func stringUTF8Views() {
        let text = "The quick brown fox jumps over the lazy dog"
        let expected = "d7a8fbb307d7809469ca9abcb0082e4f8d5651e46d3cdb762d02d0bf37c9e592"
        #expect(SHA256Digest.hash(text.utf8).hex == expected)
        #expect(SHA256Digest.hash(("[" + text + "]").dropFirst().dropLast().utf8).hex == expected)
    }

    /// An empty buffer with a `nil` base address hashes like the empty message.
    @Test func emptyBufferWithoutBaseAddress() {
        let empty = UnsafeRawBufferPointer(start: nil, count: 0)
        #expect(SHA256Digest.hash(empty).hex == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    /// `hex` and `init?(hex:)` round-trip, for `String` and `Substring` input.
    @Test(arguments: nistVectors + patternVectors)
    func hexRoundTrip(_ vector: Vector) throws {
        let digest = SHA256Digest.hash(vector.message)
        let hex = digest.hex
        #expect(hex.utf8.count == 64)
        #expect(try #require(SHA256Digest(hex: hex)) == digest)
        #expect(try #require(SHA256Digest(hex: "<\(hex)>".dropFirst().dropLast())) == digest)
        // The byte forms a folder listing uses: parsed in place, and written to a buffer.
        #expect(Array(hex.utf8).withUnsafeBytes { SHA256Digest(hexDigits: $0) } == digest)
        var written = [UInt8](repeating: 0, count: 65)
        written.withUnsafeMutableBufferPointer { digest.writeHex(to: $0) }
        #expect(written == Array(hex.utf8) + [0])
    }

    /// Hex digits cover every nibble value in every position.
    @Test func hexAllNibbles() throws {
        let hex = "0123456789abcdeffedcba98765432100123456789abcdeffedcba9876543210"
        let digest = try #require(SHA256Digest(hex: hex))
        #expect(digest.word0 == 0x0123_4567_89ab_cdef)
        #expect(digest.word1 == 0xfedc_ba98_7654_3210)
        #expect(digest.word2 == 0x0123_4567_89ab_cdef)
        #expect(digest.word3 == 0xfedc_ba98_7654_3210)
        #expect(digest.hex == hex)
        #expect(SHA256Digest(word0: 0, word1: 0, word2: 0, word3: 0).hex == String(repeating: "0", count: 64))
        let allOnes = SHA256Digest(word0: .max, word1: .max, word2: .max, word3: .max)
        #expect(allOnes.hex == String(repeating: "f", count: 64))
    }

    /// Malformed hex is rejected with `nil`: wrong length, uppercase, non-hex and non-ASCII characters.
    ///
    /// Only lowercase hex is accepted, so each digest has exactly one valid spelling.
    @Test(arguments: [
        "",
        String(repeating: "a", count: 63),
        String(repeating: "a", count: 65),
        String(repeating: "a", count: 128),
        "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD",
        "Ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015aD",
        "ga7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015a ",
        " ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        "0xba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015",
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015-d",
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015\u{0}d",
        // 62 ASCII digits plus "é" (two UTF-8 bytes): 63 characters, 64 bytes.
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015é",
        // 63 characters, the last one a two-scalar grapheme cluster.
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015a\u{301}",
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015a/",
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015a:",
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015a`",
    ])
    func invalidHexIsRejected(_ hex: String) {
        #expect(SHA256Digest(hex: hex) == nil)
        #expect(Array(hex.utf8).withUnsafeBytes { SHA256Digest(hexDigits: $0) } == nil)
    }

    /// Raw bytes round-trip through `appendRawBytes(to:)` and `init?(rawBytes:)`.
    @Test(arguments: nistVectors)
    func rawBytesRoundTrip(_ vector: Vector) throws {
        let digest = SHA256Digest.hash(vector.message)

        var bytes: [UInt8] = [1, 2, 3]
        digest.appendRawBytes(to: &bytes)
        #expect(bytes.count == 35)
        #expect(bytes.prefix(3) == [1, 2, 3])
        let raw = Array(bytes.dropFirst(3))
        #expect(Self.referenceHex(raw) == vector.expectedHex)
        #expect(try #require(SHA256Digest(rawBytes: raw)) == digest)
        #expect(try #require(SHA256Digest(rawBytes: bytes.dropFirst(3))) == digest)
    }

    /// `init?(rawBytes:)` rejects any count other than 32.
    @Test(arguments: [0, 1, 31, 33, 64])
    func rawBytesWrongCountIsRejected(count: Int) {
        #expect(SHA256Digest(rawBytes: [UInt8](repeating: 0x5a, count: count)) == nil)
        #expect(SHA256Digest(rawBytes: (0..<count).lazy.map { UInt8(truncatingIfNeeded: $0) }) == nil)
    }

    /// `init?(rawBytes:)` accepts non-contiguous collections of 32 bytes.
    @Test func rawBytesFromNonContiguousCollection() throws {
        let digest = try #require(SHA256Digest(rawBytes: (0..<32).lazy.map { UInt8($0) }))
        #expect(digest.hex == "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
    }

    /// Equal messages give equal, equally hashed digests; different messages give different digests.
    @Test func hashableConformance() {
        let first = SHA256Digest.hash(Array("key-1".utf8))
        let again = SHA256Digest.hash(Array("key-1".utf8))
        let second = SHA256Digest.hash(Array("key-2".utf8))
        #expect(first == again)
        #expect(first.hashValue == again.hashValue)
        #expect(first != second)
        #expect(Set([first, again, second]).count == 2)
    }
}
