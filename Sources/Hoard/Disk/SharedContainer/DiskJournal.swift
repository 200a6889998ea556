import Foundation

/// The journal that follows the snapshot in the container's index file: every change any process
/// made to the container's entries since that snapshot, in the order they were made.
///
/// ```
/// per record: body length u32 | body | CRC-32 of the length and the body (u32)
/// body: kind u8, then
///     1 (put):    digest (32 bytes) | file size u64 | expiry date f64 | key length u32 | key
///     2 (remove): digest (32 bytes), then key length u32 | key when the key is known
///     3 (clear)
///     4 (begin):  nothing; the records up to the next commit are one section's
///     5 (commit): nothing; the section's file changes are all done
///     6 (shared pending): deadline f64, then key length u32 | key, or nothing for every key (a clear)
/// ```
/// A `shared pending` record says that the process that journaled it has queued a change of the key
/// (a removal; every key for a clear) on the shared level that may not have been made before the
/// deadline (seconds since 1970): until then, another process does not read the key from the shared
/// level, which may still hold the value the change replaces (a fill of it would outlive the change on
/// the container). It comes before the removal (or clear) it goes with, in the same section; a
/// process that writes a snapshot journals the deadlines not passed yet again after it. A journal
/// written before this record existed has none, and reads as before.
/// All numbers are little-endian. Records are appended, each with one `write(2)`, by whoever holds
/// the container's section lock (see ``ContainerLock``), so one section's records are never
/// interleaved with another's: a section begins with `begin`, journals each change before it makes
/// it (a put before the entry's file is renamed into place, a removal before the file is unlinked, a
/// clear before the files go), and ends with `commit`. A section that has no commit before the next `begin` (or the end of the file)
/// belonged to a process killed in its middle: a reader checks the files it names instead of
/// trusting it (and rebuilds from the entry files if it holds a clear), so a kill leaves neither a
/// counted entry without a file nor a file nobody counts. A process killed in the middle of an
/// append leaves a torn last record; so does a file cut short by damage, which may have lost whole
/// records, so a torn tail in the current index file makes the next holder of the lock rebuild the
/// index from the entry files (in a replaced file it is only the end: the snapshot that replaced it
/// holds the rest). A damaged record before the last one, or a "torn" one after which an intact
/// record can still be found (a damaged length field, not a cut), means the journal cannot be
/// trusted.
enum DiskJournal {
    /// One change to the container.
    enum Record: Equatable {
        /// An entry file was written (or replaced) for `digest`.
        case put(digest: SHA256Digest, size: Int, expiresAt: Expiry, key: String)
        /// The entry file of `digest` is gone; `key` is the key it held, when the remover knew it
        /// (read from the file: the index does not keep keys), for other processes to tell their
        /// memory levels.
        case remove(digest: SHA256Digest, key: String?)
        /// Every entry file is gone.
        case clear
        /// A section's records start.
        case begin
        /// The section's file changes are done.
        case commit
        /// A change of `key` (of every key when `nil`) on the shared level is queued by the process
        /// that journaled it, and may not be made until `until` (seconds since 1970).
        case sharedPending(key: String?, until: Double)
    }

    /// How a journal read ended.
    enum Ending: Equatable {
        /// Every byte read was part of an intact record.
        case clean
        /// The last record is cut short or fails its checksum: a process died appending it.
        case tornTail
        /// A record before the last one is damaged: the journal is not the record any more.
        case damaged
    }

    private static let putKind: UInt8 = 1
    private static let removeKind: UInt8 = 2
    private static let clearKind: UInt8 = 3
    private static let beginKind: UInt8 = 4
    private static let commitKind: UInt8 = 5
    private static let sharedPendingKind: UInt8 = 6
    /// The largest body a record may claim; a longer one is damage, not a huge allocation.
    static let maximumBodySize = 1 << 26

    /// Encodes records, one after another, ready for one append.
    static func encode(_ records: [Record]) -> [UInt8] {
        var bytes: [UInt8] = []
        for record in records { append(record, to: &bytes) }
        return bytes
    }

    /// Appends one record's bytes.
    static func append(_ record: Record, to bytes: inout [UInt8]) {
        let start = bytes.count
        bytes.appendLittleEndian(UInt32(0))  // the body length, set below
        switch record {
        case .put(let digest, let size, let expiresAt, let key):
            bytes.append(putKind)
            digest.appendRawBytes(to: &bytes)
            bytes.appendLittleEndian(UInt64(clamping: size))
            bytes.appendLittleEndian(expiresAt.deadline.bitPattern)
            bytes.appendLittleEndian(UInt32(truncatingIfNeeded: key.utf8.count))
            bytes.append(contentsOf: key.utf8)
        case .remove(let digest, let key):
            bytes.append(removeKind)
            digest.appendRawBytes(to: &bytes)
            if let key {
                bytes.appendLittleEndian(UInt32(truncatingIfNeeded: key.utf8.count))
                bytes.append(contentsOf: key.utf8)
            }
        case .clear:
            bytes.append(clearKind)
        case .begin:
            bytes.append(beginKind)
        case .commit:
            bytes.append(commitKind)
        case .sharedPending(let key, let until):
            bytes.append(sharedPendingKind)
            bytes.appendLittleEndian(until.bitPattern)
            if let key {
                bytes.appendLittleEndian(UInt32(truncatingIfNeeded: key.utf8.count))
                bytes.append(contentsOf: key.utf8)
            }
        }
        let length = UInt32(truncatingIfNeeded: bytes.count - start - 4)
        withUnsafeBytes(of: length.littleEndian) { bytes.replaceSubrange(start..<start + 4, with: $0) }
        let checksum = bytes[start...].withUnsafeBytes { CRC32.checksum($0) }
        bytes.appendLittleEndian(checksum)
    }

    /// Decodes the records in `bytes`.
    ///
    /// - Returns: The intact records, the offset just past the last of them, and how the read ended.
    /// - Complexity: O(n) in the number of bytes.
    static func decode(_ bytes: UnsafeRawBufferPointer) -> (records: [Record], end: Int, ending: Ending) {
        var records: [Record] = []
        var offset = 0
        while offset < bytes.count {
            guard bytes.count - offset >= 8,
                let length = Int(exactly: bytes.loadLittleEndian(at: offset) as UInt32),
                length <= maximumBodySize
            else {
                // A length that cannot be read, or a forged one: torn if nothing follows it.
                return (records, offset, bytes.count - offset < 8 ? tailEnding(bytes, after: offset) : .damaged)
            }
            let recordEnd = offset + 4 + length + 4
            guard recordEnd <= bytes.count else { return (records, offset, tailEnding(bytes, after: offset)) }
            let covered = UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + 4 + length])
            let stored: UInt32 = bytes.loadLittleEndian(at: offset + 4 + length)
            guard CRC32.checksum(covered) == stored,
                let record = decodeBody(UnsafeRawBufferPointer(rebasing: bytes[offset + 4..<offset + 4 + length]))
            else {
                return (records, offset, recordEnd == bytes.count ? .tornTail : .damaged)
            }
            records.append(record)
            offset = recordEnd
        }
        return (records, offset, .clean)
    }

    /// How a read that cannot go on at `offset` ends: a torn tail when no intact record starts
    /// after it (what a cut append leaves), damage otherwise.
    ///
    /// - Complexity: O(n) in the bytes after `offset`: a checksum is only computed where a record of
    ///   a plausible kind and length starts.
    private static func tailEnding(_ bytes: UnsafeRawBufferPointer, after offset: Int) -> Ending {
        var start = offset + 1
        while bytes.count - start >= 9 {
            defer { start += 1 }
            guard let length = Int(exactly: bytes.loadLittleEndian(at: start) as UInt32),
                length >= 1, length <= bytes.count - start - 8
            else { continue }
            let kind = bytes[start + 4]
            let plausible =
                switch kind {
                case putKind: length >= 53
                case removeKind: length == 33 || length >= 37
                case clearKind, beginKind, commitKind: length == 1
                case sharedPendingKind: length == 9 || length >= 13
                default: false
                }
            guard plausible else { continue }
            let covered = UnsafeRawBufferPointer(rebasing: bytes[start..<start + 4 + length])
            let stored: UInt32 = bytes.loadLittleEndian(at: start + 4 + length)
            if CRC32.checksum(covered) == stored,
                decodeBody(UnsafeRawBufferPointer(rebasing: bytes[start + 4..<start + 4 + length])) != nil
            {
                return .damaged
            }
        }
        return .tornTail
    }

    /// Decodes one record's body; `nil` when it is not a record this version writes.
    private static func decodeBody(_ body: UnsafeRawBufferPointer) -> Record? {
        guard let kind = body.first else { return nil }
        switch kind {
        case putKind:
            guard body.count >= 53, let digest = SHA256Digest(rawBytes: body[1..<33]) else { return nil }
            let size: UInt64 = body.loadLittleEndian(at: 33)
            let deadline = Double(bitPattern: body.loadLittleEndian(at: 41))
            guard let fileSize = Int(exactly: size), !deadline.isNaN,
                let keyLength = Int(exactly: body.loadLittleEndian(at: 49) as UInt32), keyLength == body.count - 53
            else { return nil }
            let keyBytes = body[53...]
            let key = String(decoding: keyBytes, as: UTF8.self)
            guard key.utf8.elementsEqual(keyBytes) else { return nil }
            return .put(digest: digest, size: fileSize, expiresAt: .at(deadline), key: key)
        case removeKind:
            guard body.count >= 33, let digest = SHA256Digest(rawBytes: body[1..<33]) else { return nil }
            if body.count == 33 { return .remove(digest: digest, key: nil) }
            guard body.count >= 37,
                let keyLength = Int(exactly: body.loadLittleEndian(at: 33) as UInt32), keyLength == body.count - 37
            else { return nil }
            let key = String(decoding: body[37...], as: UTF8.self)
            guard key.utf8.elementsEqual(body[37...]) else { return nil }
            return .remove(digest: digest, key: key)
        case clearKind:
            return body.count == 1 ? .clear : nil
        case beginKind:
            return body.count == 1 ? .begin : nil
        case commitKind:
            return body.count == 1 ? .commit : nil
        case sharedPendingKind:
            guard body.count >= 9 else { return nil }
            let until = Double(bitPattern: body.loadLittleEndian(at: 1))
            guard !until.isNaN else { return nil }
            if body.count == 9 { return .sharedPending(key: nil, until: until) }
            guard body.count >= 13,
                let keyLength = Int(exactly: body.loadLittleEndian(at: 9) as UInt32), keyLength == body.count - 13
            else { return nil }
            let key = String(decoding: body[13...], as: UTF8.self)
            guard key.utf8.elementsEqual(body[13...]) else { return nil }
            return .sharedPending(key: key, until: until)
        default:
            return nil
        }
    }
}

extension DiskJournal {
    /// The records of one section, and whether it was committed.
    struct Section {
        var records: [Record] = []
        var isCommitted = false
    }

    /// Groups records into sections, in order; records outside any section (a journal cut in the
    /// middle of a section) form an uncommitted one.
    ///
    /// The last section is uncommitted when the records end before its commit: read under the
    /// section lock, that means its process died.
    static func sections(_ records: [Record]) -> [Section] {
        var sections: [Section] = []
        var current = Section()
        for record in records {
            switch record {
            case .begin:
                if !current.records.isEmpty { sections.append(current) }
                current = Section()
            case .commit:
                current.isCommitted = true
                sections.append(current)
                current = Section()
            default:
                current.records.append(record)
            }
        }
        if !current.records.isEmpty { sections.append(current) }
        return sections
    }
}
