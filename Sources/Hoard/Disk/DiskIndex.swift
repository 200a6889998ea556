import Foundation

/// What the disk store knows about one entry file without reading it.
struct DiskEntryInfo: Sendable {
    /// The key, as stored in the entry.
    var key: String
    /// The file's size in bytes.
    var size: Int
    /// When the entry stops being live.
    var expiresAt: Expiry = .never
}

/// The saved eviction order of a disk store: the file `.hoard-index` in the container.
///
/// ```
/// magic "HRDI" | version u16 (2) | reserved u16 | entry count u32
/// per entry, next victim first: digest (32 bytes) | access count u32 | file size u64 |
///     expiry date f64 (seconds since 1970, +infinity for never) | key length u32 | key
/// CRC-32 of everything before it (u32)
/// ```
/// All numbers are little-endian. The index is a hint: entry files are the truth. It is written
/// (to a temporary file, then renamed) by `flush()`, by the writer once 1 000 changes (or, when the
/// store holds more entries, as many changes as entries) have accumulated, and when the store closes; an index that is missing, damaged, or names files that are gone is repaired from the
/// entry files when the container is opened.
enum DiskIndexFile {
    static let magic: [UInt8] = Array("HRDI".utf8)
    static let version: UInt16 = 2
    /// The bytes of one record before its key.
    static let recordHeaderSize = 56

    /// One saved entry.
    struct Record {
        var digest: SHA256Digest
        var count: UInt32
        var info: DiskEntryInfo
    }

    /// Encodes records, next victim first.
    static func encode(_ records: [Record]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16 + records.count * 64)
        bytes.append(contentsOf: magic)
        bytes.appendLittleEndian(version)
        bytes.appendLittleEndian(UInt16(0))
        bytes.appendLittleEndian(UInt32(truncatingIfNeeded: records.count))
        for record in records {
            record.digest.appendRawBytes(to: &bytes)
            bytes.appendLittleEndian(record.count)
            bytes.appendLittleEndian(UInt64(record.info.size))
            bytes.appendLittleEndian(record.info.expiresAt.deadline.bitPattern)
            let key = record.info.key.utf8
            bytes.appendLittleEndian(UInt32(truncatingIfNeeded: key.count))
            bytes.append(contentsOf: key)
        }
        let checksum = bytes.withUnsafeBytes { CRC32.checksum($0) }
        bytes.appendLittleEndian(checksum)
        return bytes
    }

    /// Decodes an index; `nil` when it is damaged in any way.
    static func decode(_ bytes: UnsafeRawBufferPointer) -> [Record]? {
        guard bytes.count >= 16, bytes.starts(with: magic) else { return nil }
        guard bytes.loadLittleEndian(at: 4) as UInt16 == version else { return nil }
        let body = UnsafeRawBufferPointer(rebasing: bytes[0..<bytes.count - 4])
        guard CRC32.checksum(body) == bytes.loadLittleEndian(at: bytes.count - 4) as UInt32 else { return nil }
        // Checked: on a 32-bit platform a forged count or length must be damage, not a trap.
        guard let count = Int(exactly: bytes.loadLittleEndian(at: 8) as UInt32) else { return nil }
        var records: [Record] = []
        records.reserveCapacity(min(count, body.count / recordHeaderSize))
        var offset = 12
        for _ in 0..<count {
            guard offset + recordHeaderSize <= body.count,
                let digest = SHA256Digest(rawBytes: body[offset..<offset + 32])
            else { return nil }
            let accesses: UInt32 = body.loadLittleEndian(at: offset + 32)
            let size: UInt64 = body.loadLittleEndian(at: offset + 36)
            let deadline = Double(bitPattern: body.loadLittleEndian(at: offset + 44))
            offset += recordHeaderSize
            guard let keyLength = Int(exactly: body.loadLittleEndian(at: offset - 4) as UInt32),
                keyLength <= body.count - offset, let fileSize = Int(exactly: size), !deadline.isNaN
            else { return nil }
            let keyBytes = body[offset..<offset + keyLength]
            let key = String(decoding: keyBytes, as: UTF8.self)
            guard key.utf8.elementsEqual(keyBytes) else { return nil }
            offset += keyLength
            let info = DiskEntryInfo(key: key, size: fileSize, expiresAt: .at(deadline))
            records.append(Record(digest: digest, count: accesses, info: info))
        }
        guard offset == body.count else { return nil }
        return records
    }
}
