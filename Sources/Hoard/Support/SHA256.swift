#if canImport(CHoardChecksum) && arch(x86_64)
import CHoardChecksum
#endif

/// A SHA-256 digest (FIPS 180-4), stored as four big-endian 64-bit words.
///
/// `word0` holds digest bytes 0 to 7, `word1` bytes 8 to 15, and so on, each
/// read as a big-endian integer. Printing the words in order as zero-padded
/// hex therefore gives the usual digest string. The type is a plain value:
/// hashing, comparing and copying it never allocates.
struct SHA256Digest: Hashable, Sendable {
    /// Digest bytes 0 to 7, read as a big-endian integer.
    let word0: UInt64
    /// Digest bytes 8 to 15, read as a big-endian integer.
    let word1: UInt64
    /// Digest bytes 16 to 23, read as a big-endian integer.
    let word2: UInt64
    /// Digest bytes 24 to 31, read as a big-endian integer.
    let word3: UInt64

    /// The size of a digest in bytes.
    static var byteCount: Int { 32 }

    /// Creates a digest from its four big-endian words.
    ///
    /// - Parameters:
    ///   - word0: Digest bytes 0 to 7, read as a big-endian integer.
    ///   - word1: Digest bytes 8 to 15, read as a big-endian integer.
    ///   - word2: Digest bytes 16 to 23, read as a big-endian integer.
    ///   - word3: Digest bytes 24 to 31, read as a big-endian integer.
    init(word0: UInt64, word1: UInt64, word2: UInt64, word3: UInt64) {
        self.word0 = word0
        self.word1 = word1
        self.word2 = word2
        self.word3 = word3
    }
}

// MARK: - Hashing

extension SHA256Digest {
    /// Computes the SHA-256 digest of a collection of bytes.
    ///
    /// Contiguous collections (`[UInt8]`, `ArraySlice<UInt8>`, the UTF-8 view
    /// of a native `String`, buffer pointers, …) are hashed in place. Other
    /// collections are first copied into a temporary array.
    ///
    /// - Parameter bytes: The message to hash.
    /// - Returns: The digest of `bytes`.
    static func hash<Bytes: Collection>(_ bytes: Bytes) -> SHA256Digest where Bytes.Element == UInt8 {
        if let digest = bytes.withContiguousStorageIfAvailable({ hash(UnsafeRawBufferPointer($0)) }) {
            return digest
        }
        return Array(bytes).withUnsafeBytes { hash($0) }
    }

    /// Computes the SHA-256 digest of the bytes in a raw buffer.
    ///
    /// This is the core of the implementation: full 64-byte blocks are read
    /// straight from `buffer`, and the padded tail is assembled in a
    /// stack-allocated scratch area, so no heap allocation happens. On x86_64
    /// CPUs with the SHA extensions the blocks are compressed by the
    /// `CHoardChecksum` C target; elsewhere by ``portableHash(_:)``.
    ///
    /// - Parameter buffer: The message to hash. It may be empty and may have
    ///   a `nil` base address.
    /// - Returns: The digest of the bytes in `buffer`.
    /// - Complexity: O(*n*), where *n* is the length of `buffer`.
    static func hash(_ buffer: UnsafeRawBufferPointer) -> SHA256Digest {
        #if canImport(CHoardChecksum) && arch(x86_64)
        if hasSHAExtensions { return extensionsHash(buffer) }
        #endif
        return portableHash(buffer)
    }

    /// Computes the SHA-256 digest of the bytes in a raw buffer in Swift alone, whatever the CPU
    /// (the tests compare the SHA extensions with it).
    ///
    /// - Parameter buffer: The message to hash. It may be empty and may have
    ///   a `nil` base address.
    /// - Returns: The digest of the bytes in `buffer`.
    /// - Complexity: O(*n*), where *n* is the length of `buffer`.
    static func portableHash(_ buffer: UnsafeRawBufferPointer) -> SHA256Digest {
        var state = CompressionState()
        let fullBlockCount = buffer.count / 64

        roundConstants.withUnsafeBufferPointer { constants in
            withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { schedule in
                if let base = buffer.baseAddress {
                    var block = base
                    for _ in 0..<fullBlockCount {
                        state.compress(block: block, schedule: schedule, constants: constants)
                        block += 64
                    }
                }

                withUnsafeTemporaryAllocation(byteCount: 128, alignment: 8) { tail in
                    let tailBlockCount = pad(buffer, into: tail)
                    guard let tailBase = tail.baseAddress else { return }
                    state.compress(block: UnsafeRawPointer(tailBase), schedule: schedule, constants: constants)
                    if tailBlockCount == 2 {
                        state.compress(block: UnsafeRawPointer(tailBase + 64), schedule: schedule, constants: constants)
                    }
                }
            }
        }
        return state.digest
    }

    /// Writes the padded end of a message (FIPS 180-4, section 5.1.1) to a scratch area: the bytes
    /// after its last full 64-byte block, the 0x80 byte, zeros, and the message length in bits.
    ///
    /// - Parameters:
    ///   - buffer: The whole message. It may be empty and may have a `nil` base address.
    ///   - tail: At least 128 bytes, overwritten from the start.
    /// - Returns: How many 64-byte blocks at the start of `tail` make the padded end: 1, or 2 when
    ///   the length does not fit after the message's last bytes.
    @inline(__always)
    private static func pad(_ buffer: UnsafeRawBufferPointer, into tail: UnsafeMutableRawBufferPointer) -> Int {
        let count = buffer.count
        let tailCount = count & 63
        tail.initializeMemory(as: UInt8.self, repeating: 0)
        if tailCount > 0, let base = buffer.baseAddress {
            let tailStart = base + (count &- tailCount)
            tail.copyMemory(from: UnsafeRawBufferPointer(start: tailStart, count: tailCount))
        }
        tail[tailCount] = 0x80
        // The message length in bits, modulo 2^64 as FIPS 180-4 specifies.
        let bitCount = UInt64(truncatingIfNeeded: count) &* 8
        let tailBlockCount = tailCount < 56 ? 1 : 2
        tail.storeBytes(of: bitCount.bigEndian, toByteOffset: tailBlockCount * 64 - 8, as: UInt64.self)
        return tailBlockCount
    }

    #if canImport(CHoardChecksum) && arch(x86_64)
    /// Whether this CPU has the SHA extensions and SSSE3, asked once per process.
    static let hasSHAExtensions = hoard_sha256_available() != 0

    /// Computes the SHA-256 digest of the bytes in a raw buffer with the SHA extensions, through
    /// `hoard_sha256_compress`: the full blocks in place in one call, the padded tail in a second.
    ///
    /// Call only when ``hasSHAExtensions`` is true.
    ///
    /// - Parameter buffer: The message to hash. It may be empty and may have
    ///   a `nil` base address.
    /// - Returns: The digest of the bytes in `buffer`.
    /// - Complexity: O(*n*), where *n* is the length of `buffer`.
    private static func extensionsHash(_ buffer: UnsafeRawBufferPointer) -> SHA256Digest {
        var state = CompressionState()
        // A homogeneous tuple, whose elements are laid out like an array's, for the C side's
        // `uint32_t[8]`; the initial values are the Swift state's.
        var words = (state.h0, state.h1, state.h2, state.h3, state.h4, state.h5, state.h6, state.h7)
        let fullBlockCount = buffer.count / 64
        withUnsafeMutablePointer(to: &words) { tuple in
            tuple.withMemoryRebound(to: UInt32.self, capacity: 8) { words in
                if fullBlockCount > 0, let base = buffer.baseAddress {
                    hoard_sha256_compress(words, base, fullBlockCount)
                }
                withUnsafeTemporaryAllocation(byteCount: 128, alignment: 8) { tail in
                    let tailBlockCount = pad(buffer, into: tail)
                    hoard_sha256_compress(words, UnsafeRawPointer(tail.baseAddress), tailBlockCount)
                }
            }
        }
        (state.h0, state.h1, state.h2, state.h3, state.h4, state.h5, state.h6, state.h7) = words
        return state.digest
    }
    #endif

    /// The 64 SHA-256 round constants (FIPS 180-4, section 4.2.2).
    ///
    /// They are the first 32 bits of the fractional parts of the cube roots
    /// of the first 64 prime numbers.
    private static let roundConstants: [UInt32] = [
        0x428a_2f98, 0x7137_4491, 0xb5c0_fbcf, 0xe9b5_dba5, 0x3956_c25b, 0x59f1_11f1, 0x923f_82a4, 0xab1c_5ed5,
        0xd807_aa98, 0x1283_5b01, 0x2431_85be, 0x550c_7dc3, 0x72be_5d74, 0x80de_b1fe, 0x9bdc_06a7, 0xc19b_f174,
        0xe49b_69c1, 0xefbe_4786, 0x0fc1_9dc6, 0x240c_a1cc, 0x2de9_2c6f, 0x4a74_84aa, 0x5cb0_a9dc, 0x76f9_88da,
        0x983e_5152, 0xa831_c66d, 0xb003_27c8, 0xbf59_7fc7, 0xc6e0_0bf3, 0xd5a7_9147, 0x06ca_6351, 0x1429_2967,
        0x27b7_0a85, 0x2e1b_2138, 0x4d2c_6dfc, 0x5338_0d13, 0x650a_7354, 0x766a_0abb, 0x81c2_c92e, 0x9272_2c85,
        0xa2bf_e8a1, 0xa81a_664b, 0xc24b_8b70, 0xc76c_51a3, 0xd192_e819, 0xd699_0624, 0xf40e_3585, 0x106a_a070,
        0x19a4_c116, 0x1e37_6c08, 0x2748_774c, 0x34b0_bcb5, 0x391c_0cb3, 0x4ed8_aa4a, 0x5b9c_ca4f, 0x682e_6ff3,
        0x748f_82ee, 0x78a5_636f, 0x84c8_7814, 0x8cc7_0208, 0x90be_fffa, 0xa450_6ceb, 0xbef9_a3f7, 0xc671_78f2,
    ]

    /// The eight 32-bit working hash values of a SHA-256 computation.
    ///
    /// It starts with the initial hash value of FIPS 180-4, section 5.3.3,
    /// and is updated by one compression per 64-byte message block.
    private struct CompressionState {
        /// Hash word H0.
        var h0: UInt32 = 0x6a09_e667
        /// Hash word H1.
        var h1: UInt32 = 0xbb67_ae85
        /// Hash word H2.
        var h2: UInt32 = 0x3c6e_f372
        /// Hash word H3.
        var h3: UInt32 = 0xa54f_f53a
        /// Hash word H4.
        var h4: UInt32 = 0x510e_527f
        /// Hash word H5.
        var h5: UInt32 = 0x9b05_688c
        /// Hash word H6.
        var h6: UInt32 = 0x1f83_d9ab
        /// Hash word H7.
        var h7: UInt32 = 0x5be0_cd19

        /// The digest formed by the current hash words.
        var digest: SHA256Digest {
            SHA256Digest(
                word0: UInt64(h0) << 32 | UInt64(h1),
                word1: UInt64(h2) << 32 | UInt64(h3),
                word2: UInt64(h4) << 32 | UInt64(h5),
                word3: UInt64(h6) << 32 | UInt64(h7)
            )
        }

        /// Rotates a 32-bit word right by `count` bits.
        ///
        /// - Parameters:
        ///   - value: The word to rotate.
        ///   - count: The rotation distance, in `1..<32`.
        /// - Returns: `value` rotated right by `count` bits.
        @inline(__always)
        private static func rotateRight(_ value: UInt32, by count: UInt32) -> UInt32 {
            (value &>> count) | (value &<< (32 &- count))
        }

        /// The message-schedule function σ0 (FIPS 180-4, (4.6)).
        ///
        /// - Parameter word: The schedule word 15 places back.
        /// - Returns: σ0 of `word`.
        @inline(__always)
        private static func smallSigma0(_ word: UInt32) -> UInt32 {
            rotateRight(word, by: 7) ^ rotateRight(word, by: 18) ^ (word &>> 3)
        }

        /// The message-schedule function σ1 (FIPS 180-4, (4.7)).
        ///
        /// - Parameter word: The schedule word 2 places back.
        /// - Returns: σ1 of `word`.
        @inline(__always)
        private static func smallSigma1(_ word: UInt32) -> UInt32 {
            rotateRight(word, by: 17) ^ rotateRight(word, by: 19) ^ (word &>> 10)
        }

        /// Performs one SHA-256 round in place, without shuffling the working variables.
        ///
        /// The caller rotates the roles of the eight working variables instead:
        /// after the round, `h` holds the new `a` and `d` holds the new `e`.
        ///
        /// - Parameters:
        ///   - a: Working variable a.
        ///   - b: Working variable b.
        ///   - c: Working variable c.
        ///   - d: Working variable d; receives the new e.
        ///   - e: Working variable e.
        ///   - f: Working variable f.
        ///   - g: Working variable g.
        ///   - h: Working variable h; receives the new a.
        ///   - constantPlusWord: The round constant plus the message schedule word.
        @inline(__always)
        private static func round(
            _ a: UInt32,
            _ b: UInt32,
            _ c: UInt32,
            _ d: inout UInt32,
            _ e: UInt32,
            _ f: UInt32,
            _ g: UInt32,
            _ h: inout UInt32,
            _ constantPlusWord: UInt32
        ) {
            let bigSigma1 = rotateRight(e, by: 6) ^ rotateRight(e, by: 11) ^ rotateRight(e, by: 25)
            let choice = g ^ (e & (f ^ g))
            // The rounds wait on the new e, one round after the other: everything but Σ1(e) is
            // summed first (h and the word are known rounds ahead), so that Σ1 is the last
            // addition in that chain, and d joins before it rather than after.
            let partial = h &+ constantPlusWord &+ choice
            let temp1 = partial &+ bigSigma1
            let bigSigma0 = rotateRight(a, by: 2) ^ rotateRight(a, by: 13) ^ rotateRight(a, by: 22)
            let majority = (a & b) | (c & (a | b))
            d = (d &+ partial) &+ bigSigma1
            h = temp1 &+ (bigSigma0 &+ majority)
        }

        /// Processes one 64-byte message block (FIPS 180-4, section 6.2.2).
        ///
        /// - Parameters:
        ///   - block: The start of the 64 message bytes; no alignment needed.
        ///   - schedule: Scratch space for the 64-word message schedule.
        ///   - constants: The 64 round constants.
        @inline(__always)
        mutating func compress(
            block: UnsafeRawPointer,
            schedule: UnsafeMutableBufferPointer<UInt32>,
            constants: UnsafeBufferPointer<UInt32>
        ) {
            for t in 0..<16 {
                schedule[t] = UInt32(bigEndian: block.loadUnaligned(fromByteOffset: t &* 4, as: UInt32.self))
            }
            // Two words a step, with the newest two kept in registers: each word needs the one
            // two places back (through sigma1), and reading it back from `schedule` put a store and
            // a load (store forwarding, ~5 cycles) in that chain at every word. The other reads are
            // of words stored at least six words earlier, so they are off the chain.
            var twoBack = schedule[14]
            var oneBack = schedule[15]
            var t = 16
            while t < 64 {
                let w15 = schedule[t &- 15]
                let w14 = schedule[t &- 14]
                let next = schedule[t &- 16] &+ Self.smallSigma0(w15) &+ schedule[t &- 7] &+ Self.smallSigma1(twoBack)
                let afterNext = w15 &+ Self.smallSigma0(w14) &+ schedule[t &- 6] &+ Self.smallSigma1(oneBack)
                schedule[t] = next
                schedule[t &+ 1] = afterNext
                twoBack = next
                oneBack = afterNext
                t &+= 2
            }

            var a = h0
            var b = h1
            var c = h2
            var d = h3
            var e = h4
            var f = h5
            var g = h6
            var h = h7
            t = 0
            while t < 64 {
                Self.round(a, b, c, &d, e, f, g, &h, constants[t] &+ schedule[t])
                Self.round(h, a, b, &c, d, e, f, &g, constants[t &+ 1] &+ schedule[t &+ 1])
                Self.round(g, h, a, &b, c, d, e, &f, constants[t &+ 2] &+ schedule[t &+ 2])
                Self.round(f, g, h, &a, b, c, d, &e, constants[t &+ 3] &+ schedule[t &+ 3])
                Self.round(e, f, g, &h, a, b, c, &d, constants[t &+ 4] &+ schedule[t &+ 4])
                Self.round(d, e, f, &g, h, a, b, &c, constants[t &+ 5] &+ schedule[t &+ 5])
                Self.round(c, d, e, &f, g, h, a, &b, constants[t &+ 6] &+ schedule[t &+ 6])
                Self.round(b, c, d, &e, f, g, h, &a, constants[t &+ 7] &+ schedule[t &+ 7])
                t &+= 8
            }
            h0 &+= a
            h1 &+= b
            h2 &+= c
            h3 &+= d
            h4 &+= e
            h5 &+= f
            h6 &+= g
            h7 &+= h
        }
    }
}

// MARK: - Hex

extension SHA256Digest {
    /// Parses a digest from its hex representation.
    ///
    /// The string must be exactly 64 characters long and consist only of the
    /// lowercase hex digits `0`-`9` and `a`-`f`. Uppercase digits, whitespace,
    /// signs, prefixes such as `0x` and any other character are rejected, so
    /// that each digest has exactly one accepted spelling (the one `hex`
    /// produces). Invalid input returns `nil`; it never traps.
    ///
    /// - Parameter hex: The 64-character lowercase hex string.
    init?(hex: some StringProtocol) {
        let parsed = hex.utf8.withContiguousStorageIfAvailable { Self(hexDigits: UnsafeRawBufferPointer($0)) }
        guard let digest = parsed ?? Array(hex.utf8).withUnsafeBytes({ Self(hexDigits: $0) }) else { return nil }
        self = digest
    }

    /// Parses a digest from the bytes of its hex representation, under the rules of
    /// ``init(hex:)``: exactly 64 lowercase hex digits.
    ///
    /// For names read in place, from a folder listing, without making a string of each.
    ///
    /// - Parameter bytes: The 64 ASCII digits.
    init?(hexDigits bytes: UnsafeRawBufferPointer) {
        guard bytes.count == 64 else { return nil }
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        for wordIndex in 0..<4 {
            var accumulator: UInt64 = 0
            for unit in bytes[wordIndex &* 16..<wordIndex &* 16 &+ 16] {
                let value: UInt8
                switch unit {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): value = unit &- UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): value = unit &- UInt8(ascii: "a") &+ 10
                default: return nil
                }
                accumulator = accumulator &<< 4 | UInt64(value)
            }
            switch wordIndex {
            case 0: words.0 = accumulator
            case 1: words.1 = accumulator
            case 2: words.2 = accumulator
            default: words.3 = accumulator
            }
        }
        self.init(word0: words.0, word1: words.1, word2: words.2, word3: words.3)
    }

    /// The digest as 64 lowercase hex characters.
    ///
    /// The string is written directly into uninitialized string storage, one
    /// nibble at a time, without going through `String(format:)`.
    var hex: String {
        String(unsafeUninitializedCapacity: 64) { buffer in
            writeHex(to: buffer)
            return 64
        }
    }

    /// Writes the 64 lowercase hex characters of ``hex`` to the start of `buffer`, which holds at
    /// least 64 bytes (for a file name made without a string).
    func writeHex(to buffer: UnsafeMutableBufferPointer<UInt8>) {
        precondition(buffer.count >= 64, "a digest's hex needs 64 bytes")
        /// Writes the 16 hex digits of `word`, most significant first, starting at `offset`.
        func write(_ word: UInt64, at offset: Int) {
            var shift: UInt64 = 60
            for index in offset..<(offset &+ 16) {
                let nibble = UInt8(truncatingIfNeeded: word &>> shift) & 0x0f
                buffer[index] = nibble < 10 ? nibble &+ UInt8(ascii: "0") : nibble &+ (UInt8(ascii: "a") &- 10)
                shift &-= 4
            }
        }
        write(word0, at: 0)
        write(word1, at: 16)
        write(word2, at: 32)
        write(word3, at: 48)
    }
}

// MARK: - Raw bytes

extension SHA256Digest {
    /// Rebuilds a digest from its 32 raw bytes.
    ///
    /// The bytes are in the order SHA-256 produces them, which is also the
    /// order `appendRawBytes(to:)` and `writeRawBytes(to:)` write.
    ///
    /// - Parameter rawBytes: Exactly 32 bytes; any other count returns `nil`.
    init?(rawBytes: some Collection<UInt8>) {
        guard rawBytes.count == 32 else { return nil }
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        var index = 0
        for byte in rawBytes {
            switch index >> 3 {
            case 0: words.0 = words.0 &<< 8 | UInt64(byte)
            case 1: words.1 = words.1 &<< 8 | UInt64(byte)
            case 2: words.2 = words.2 &<< 8 | UInt64(byte)
            default: words.3 = words.3 &<< 8 | UInt64(byte)
            }
            index += 1
            // Guards against a collection whose iteration disagrees with `count`.
            if index == 32 { break }
        }
        guard index == 32 else { return nil }
        self.init(word0: words.0, word1: words.1, word2: words.2, word3: words.3)
    }

    /// Appends the 32 raw digest bytes to the end of a byte array.
    ///
    /// - Parameter bytes: The array to extend; existing contents are kept.
    func appendRawBytes(to bytes: inout [UInt8]) {
        bytes.reserveCapacity(bytes.count + 32)
        withUnsafeBytes(of: word0.bigEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: word1.bigEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: word2.bigEndian) { bytes.append(contentsOf: $0) }
        withUnsafeBytes(of: word3.bigEndian) { bytes.append(contentsOf: $0) }
    }
}
