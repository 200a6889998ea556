import Foundation

/// What the disk store knows about one entry file without reading it.
///
/// Sixteen bytes: the key is not kept in memory (it is in the entry file's header; see
/// ``DiskStore/storedKey(of:)``), so that an entry of the index costs its digest, these two fields
/// and the eviction order's links and hash table cell, whatever the length of its key.
struct DiskEntryInfo: Sendable {
    /// The file's size in bytes.
    var size: Int
    /// When the entry stops being live.
    var expiresAt: Expiry = .never
}

/// The snapshot at the head of the container's index file, `.hoard-index`: the eviction order at
/// one moment, followed in the same file by the journal of every change since (see ``DiskJournal``).
///
/// ```
/// magic "HRDI" | version u16 (4) | reserved u16 | entry count u32
/// per entry, next victim first: digest (32 bytes) | access count u32 | file size u64 |
///     expiry date f64 (seconds since 1970, +infinity for never)
/// CRC-32 of everything before it (u32)
/// journal records, each with its own CRC-32, up to the end of the file
/// ```
/// All numbers are little-endian. The snapshot and the journal together are the record of what the
/// container holds: a store that finds both intact opens from them without listing the folder. A
/// snapshot of another version, a damaged one, or a journal damaged before its last record is not
/// trusted: the store rebuilds the order from the entry files (a version 2 index, written by earlier
/// releases without a journal, only orders that rebuild). A version 3 index, whose records also
/// held each key, is opened from like this version's (see ``decodeOpenableSnapshot(_:)``).
/// A snapshot is written (to a temporary file, then renamed over the old index, which starts an
/// empty journal) by `flush()`, by the writer once the journal or the changes not in a snapshot
/// reach 1 000 (or, when the store holds more entries, as many as it holds), and when the store
/// closes.
enum DiskIndexFile {
    static let magic: [UInt8] = Array("HRDI".utf8)
    /// The version this release writes.
    static let version: UInt16 = 4
    /// The version of earlier releases: an index with no journal, read only as a hint.
    static let legacyVersion: UInt16 = 2
    /// The version of the releases that kept each key in the records (and in memory).
    static let keyedVersion: UInt16 = 3
    /// The bytes of one record (of a version 2 or 3 record, before its key length and key).
    static let recordSize = 52
    /// The bytes before the first record.
    static let headerSize = 12

    /// One saved entry.
    struct Record {
        var digest: SHA256Digest
        var count: UInt32
        var info: DiskEntryInfo
    }

    /// The bytes of a snapshot of `records` records (with an empty journal).
    static func snapshotSize(records: Int) -> Int {
        headerSize + records * recordSize + 4
    }

    /// Encodes a snapshot (with an empty journal), records next victim first.
    static func encode(_ records: [Record]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(headerSize + 4 + records.count * recordSize)
        bytes.append(contentsOf: magic)
        bytes.appendLittleEndian(version)
        bytes.appendLittleEndian(UInt16(0))
        bytes.appendLittleEndian(UInt32(truncatingIfNeeded: records.count))
        for record in records {
            record.digest.appendRawBytes(to: &bytes)
            bytes.appendLittleEndian(record.count)
            bytes.appendLittleEndian(UInt64(record.info.size))
            bytes.appendLittleEndian(record.info.expiresAt.deadline.bitPattern)
        }
        let checksum = bytes.withUnsafeBytes { CRC32.checksum($0) }
        bytes.appendLittleEndian(checksum)
        return bytes
    }

    /// Decodes a file that holds a snapshot and nothing after it; `nil` when it is damaged in any way.
    static func decode(_ bytes: UnsafeRawBufferPointer) -> [Record]? {
        guard let snapshot = decodeSnapshot(bytes), snapshot.end == bytes.count else { return nil }
        return snapshot.records
    }

    /// Decodes the snapshot at the head of an index file this release opens from: one of this
    /// version, or of version 3, whose records differ only by holding each key too (its journal's
    /// records are ones this release reads); the next snapshot is written in this version.
    static func decodeOpenableSnapshot(_ bytes: UnsafeRawBufferPointer) -> (records: [Record], end: Int)? {
        decodeSnapshot(bytes) ?? decodeSnapshot(bytes, version: keyedVersion)
    }

    /// Decodes the snapshot at the head of an index file of `version`.
    ///
    /// A version 2 or 3 snapshot (see ``legacyVersion``, ``keyedVersion``) is read without its keys.
    ///
    /// - Returns: The records, and the offset where the journal starts; `nil` when the snapshot is
    ///   damaged, or of another version.
    static func decodeSnapshot(
        _ bytes: UnsafeRawBufferPointer,
        version: UInt16 = Self.version
    ) -> (records: [Record], end: Int)? {
        guard bytes.count >= headerSize + 4, bytes.starts(with: magic) else { return nil }
        guard bytes.loadLittleEndian(at: 4) as UInt16 == version else { return nil }
        let hasKeys = version < 4
        // Checked: on a 32-bit platform a forged count or length must be damage, not a trap.
        guard let count = Int(exactly: bytes.loadLittleEndian(at: 8) as UInt32) else { return nil }
        let fixedSize = hasKeys ? recordSize + 4 : recordSize
        var records: [Record] = []
        records.reserveCapacity(min(count, bytes.count / fixedSize))
        var offset = headerSize
        let limit = bytes.count - 4
        for _ in 0..<count {
            guard offset <= limit - fixedSize,
                let digest = SHA256Digest(rawBytes: bytes[offset..<offset + 32])
            else { return nil }
            let accesses: UInt32 = bytes.loadLittleEndian(at: offset + 32)
            let size: UInt64 = bytes.loadLittleEndian(at: offset + 36)
            let deadline = Double(bitPattern: bytes.loadLittleEndian(at: offset + 44))
            offset += fixedSize
            guard let fileSize = Int(exactly: size), !deadline.isNaN else { return nil }
            if hasKeys {
                guard let keyLength = Int(exactly: bytes.loadLittleEndian(at: offset - 4) as UInt32),
                    keyLength <= limit - offset
                else { return nil }
                let keyBytes = bytes[offset..<offset + keyLength]
                guard String(decoding: keyBytes, as: UTF8.self).utf8.elementsEqual(keyBytes) else { return nil }
                offset += keyLength
            }
            let info = DiskEntryInfo(size: fileSize, expiresAt: .at(deadline))
            records.append(Record(digest: digest, count: accesses, info: info))
        }
        guard offset <= limit else { return nil }
        let body = UnsafeRawBufferPointer(rebasing: bytes[0..<offset])
        guard CRC32.checksum(body) == bytes.loadLittleEndian(at: offset) as UInt32 else { return nil }
        return (records, offset + 4)
    }
}
