import Foundation

/// The bytes of one entry file: a fixed header, the key, the payload and a CRC-32 over all of it.
///
/// ```
/// offset  size  field
///      0     4  magic "HRDE"
///      4     2  format version (1), little-endian like every number here
///      6     2  flags: bit 0 = has an expiry date
///      8     4  schema version (the cache's `version`; 0 by default)
///     12     4  key length in bytes (UTF-8)
///     16     4  payload length in bytes
///     20     8  expiry date, seconds since 1970 as a Float64 bit pattern (0 without bit 0)
///     28     k  key
///   28+k     p  payload
/// 28+k+p     4  CRC-32 of bytes 0 ..< 28+k+p
/// ```
/// A file whose size, magic, version or checksum does not match is damaged; so is one whose key is
/// not the key that was asked for (a file renamed or copied by hand). Damaged files are misses.
@usableFromInline
enum EntryFormat {
    static let magic: [UInt8] = Array("HRDE".utf8)
    static let version: UInt16 = 1
    static let headerSize = 28
    static let trailerSize = 4
    static let hasExpiryFlag: UInt16 = 1

    /// One decoded entry.
    @usableFromInline
    struct Entry {
        var key: String
        @usableFromInline var payload: Data
        var schemaVersion: UInt32
        @usableFromInline var expiresAt: Expiry
    }

    /// Why a file is not a valid entry.
    enum Damage: Error, CustomStringConvertible {
        case tooShort(Int)
        case badMagic
        case unsupportedVersion(UInt16)
        case lengthMismatch(expected: Int, actual: Int)
        case checksumMismatch
        case invalidKey
        case invalidExpiry
        /// A length field larger than this platform's `Int` can hold, or whose sum overflows it: a
        /// damaged or forged file (on 32-bit platforms, any length above `Int32.max`).
        case impossibleLength

        var description: String {
            switch self {
            case .tooShort(let size): "too short (\(size) bytes)"
            case .badMagic: "not a Hoard entry (bad magic)"
            case .unsupportedVersion(let version): "unsupported format version \(version)"
            case .lengthMismatch(let expected, let actual):
                "truncated or padded (\(actual) bytes, \(expected) expected)"
            case .checksumMismatch: "checksum mismatch"
            case .invalidKey: "the stored key is not valid UTF-8"
            case .invalidExpiry: "the stored expiry date is not a number"
            case .impossibleLength: "a length field is larger than any file this platform can hold"
            }
        }
    }

    /// Encodes an entry into the bytes of its file.
    static func encode(key: String, payload: Data, schemaVersion: UInt32, expiresAt: Expiry) -> [UInt8] {
        let keyBytes = key.utf8
        var bytes: [UInt8] = []
        bytes.reserveCapacity(headerSize + keyBytes.count + payload.count + trailerSize)
        bytes.append(contentsOf: magic)
        bytes.appendLittleEndian(version)
        bytes.appendLittleEndian(expiresAt.isNever ? 0 : hasExpiryFlag)
        bytes.appendLittleEndian(schemaVersion)
        bytes.appendLittleEndian(UInt32(truncatingIfNeeded: keyBytes.count))
        bytes.appendLittleEndian(UInt32(truncatingIfNeeded: payload.count))
        bytes.appendLittleEndian((expiresAt.secondsSince1970 ?? 0).bitPattern)
        bytes.append(contentsOf: keyBytes)
        bytes.append(contentsOf: payload)
        let checksum = bytes.withUnsafeBytes { CRC32.checksum($0) }
        bytes.appendLittleEndian(checksum)
        return bytes
    }

    /// The largest key or payload a file can hold: the length fields are 32-bit, and on a 32-bit
    /// platform (watchOS on arm64_32) no buffer exceeds `Int.max`.
    static let maximumFieldSize = Int(clamping: UInt32.max)

    /// Decodes and checks the bytes of an entry file.
    ///
    /// - Throws: ``Damage`` when the bytes are not a complete, intact entry.
    static func decode(_ bytes: [UInt8]) throws(Damage) -> Entry {
        try bytes.withUnsafeBytes { buffer in
            Result { () throws(Damage) in try decode(buffer) }
        }.get()
    }

    /// Decodes and checks the bytes of an entry file.
    ///
    /// - Throws: ``Damage`` when the bytes are not a complete, intact entry.
    static func decode(_ bytes: UnsafeRawBufferPointer) throws(Damage) -> Entry {
        let layout = try check(bytes)
        // Valid UTF-8 (checked): decoding repairs nothing.
        let key = String(decoding: bytes[layout.key], as: UTF8.self)
        let payload = Data(bytes[layout.payload])
        return Entry(key: key, payload: payload, schemaVersion: layout.schemaVersion, expiresAt: layout.expiresAt)
    }

    /// Where the key and the payload of an intact entry lie in its bytes, and its header's fields.
    struct Layout {
        /// The key's bytes (valid UTF-8).
        var key: Range<Int>
        var payload: Range<Int>
        var schemaVersion: UInt32
        var expiresAt: Expiry
    }

    /// Checks the bytes of an entry file as `decode(_:)` does (size,
    /// magic, version, checksum, key, expiry), without copying the key or the payload out of them.
    ///
    /// - Throws: ``Damage`` when the bytes are not a complete, intact entry: the error `decode` throws.
    /// - Complexity: O(n) in the bytes (the checksum); no allocation for an ASCII key.
    static func check(_ bytes: UnsafeRawBufferPointer) throws(Damage) -> Layout {
        guard bytes.count >= headerSize + trailerSize else { throw .tooShort(bytes.count) }
        guard bytes.starts(with: magic) else { throw .badMagic }
        let version: UInt16 = bytes.loadLittleEndian(at: 4)
        guard version == Self.version else { throw .unsupportedVersion(version) }
        let flags: UInt16 = bytes.loadLittleEndian(at: 6)
        let schemaVersion: UInt32 = bytes.loadLittleEndian(at: 8)
        // Checked conversions and sums: on a 32-bit platform a forged length must be damage, not a trap.
        guard let keyLength = Int(exactly: bytes.loadLittleEndian(at: 12) as UInt32),
            let payloadLength = Int(exactly: bytes.loadLittleEndian(at: 16) as UInt32)
        else { throw .impossibleLength }
        let expiryBits: UInt64 = bytes.loadLittleEndian(at: 20)
        let (fields, fieldsOverflow) = keyLength.addingReportingOverflow(payloadLength)
        let (expected, expectedOverflow) = fields.addingReportingOverflow(headerSize + trailerSize)
        guard !fieldsOverflow, !expectedOverflow else { throw .impossibleLength }
        guard bytes.count == expected else { throw .lengthMismatch(expected: expected, actual: bytes.count) }
        let body = UnsafeRawBufferPointer(rebasing: bytes[0..<expected - trailerSize])
        let stored: UInt32 = bytes.loadLittleEndian(at: expected - trailerSize)
        guard CRC32.checksum(body) == stored else { throw .checksumMismatch }
        let key = headerSize..<headerSize + keyLength
        guard isValidUTF8(UnsafeRawBufferPointer(rebasing: bytes[key])) else { throw .invalidKey }
        let deadline = flags & hasExpiryFlag != 0 ? Double(bitPattern: expiryBits) : nil
        // Never written (a NaN expiry is stored as already expired): only a forged file holds one.
        if let deadline, deadline.isNaN { throw .invalidExpiry }
        return Layout(
            key: key,
            payload: key.upperBound..<key.upperBound + payloadLength,
            schemaVersion: schemaVersion,
            expiresAt: Expiry(secondsSince1970: deadline)
        )
    }

    /// Whether `bytes` are valid UTF-8; ASCII (most keys) is checked without making a string.
    static func isValidUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if bytes.allSatisfy({ $0 < 0x80 }) { return true }
        // `String(decoding:)` repairs invalid UTF-8; a repaired key is not the stored key.
        return String(decoding: bytes, as: UTF8.self).utf8.elementsEqual(bytes)
    }
}

extension [UInt8] {
    /// Appends a fixed-width integer in little-endian byte order.
    mutating func appendLittleEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }
}

extension UnsafeRawBufferPointer {
    /// Reads a little-endian integer at a byte offset; the caller has checked the bounds.
    func loadLittleEndian<T: FixedWidthInteger>(at offset: Int) -> T {
        T(littleEndian: loadUnaligned(fromByteOffset: offset, as: T.self))
    }
}
