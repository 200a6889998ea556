import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The keys of entry files, read from the files' headers.
///
/// The index does not keep keys in memory (see ``DiskEntryInfo``): what needs one for an entry the
/// caller did not name (an eviction or an expiry sweep that reports it, `allKeys`) reads it from the
/// entry file's header, before the file is removed.
extension DiskStore {
    /// The key stored in the entry file of `digest`.
    ///
    /// Reads the file's header and key only, not its payload or checksum: the key is trusted when it
    /// hashes to the file's name, which a damaged or foreign key does not.
    ///
    /// - Returns: The key, or `nil` when the file is missing, unreadable, not an entry of this
    ///   format, or holds a key that is not its name's.
    /// - Complexity: One open and at most two reads of the file.
    func storedKey(of digest: SHA256Digest) -> String? { storedHeader(of: digest)?.key }

    /// The key and the expiry stored in the entry file of `digest`, read as ``storedKey(of:)`` reads
    /// the key.
    func storedHeader(of digest: SHA256Digest) -> (key: String, expiresAt: Expiry)? {
        guard let file = try? directory.open(digest.hex, flags: O_RDONLY) else { return nil }
        defer { close(file) }
        // Most keys fit in the first read.
        guard var bytes = RawIO.read(file, count: EntryFormat.headerSize + 120, at: 0),
            bytes.count >= EntryFormat.headerSize, bytes.starts(with: EntryFormat.magic)
        else { return nil }
        let (version, flags, keyLength, expiryBits): (UInt16, UInt16, UInt32, UInt64) = bytes.withUnsafeBytes {
            (
                $0.loadLittleEndian(at: 4), $0.loadLittleEndian(at: 6), $0.loadLittleEndian(at: 12),
                $0.loadLittleEndian(at: 20)
            )
        }
        guard version == EntryFormat.version, let length = Int(exactly: keyLength),
            length <= EntryFormat.maximumFieldSize
        else { return nil }
        let end = EntryFormat.headerSize + length
        if bytes.count < end {
            guard let rest = RawIO.read(file, count: end - bytes.count, at: bytes.count) else { return nil }
            bytes += rest
        }
        guard bytes.count >= end else { return nil }
        let keyBytes = bytes[EntryFormat.headerSize..<end]
        let key = String(decoding: keyBytes, as: UTF8.self)
        guard key.utf8.elementsEqual(keyBytes), DiskKey(key).digest == digest else { return nil }
        let deadline = flags & EntryFormat.hasExpiryFlag != 0 ? Double(bitPattern: expiryBits) : nil
        return (key, Expiry(secondsSince1970: deadline))
    }

    /// The keys stored in the entry files of `digests`, in their order, read on every core.
    ///
    /// - Complexity: O(n) file reads (see ``storedKey(of:)``).
    func storedKeys(of digests: [SHA256Digest]) -> [String?] {
        digests.concurrentMap(chunkSize: 64) { self.storedKey(of: $0) }
    }
}

extension DiskStore {
    /// Journals the removal of entries the index dropped already (with the keys their files hold),
    /// then removes their files; called inside a section (or while opening).
    ///
    /// - Parameters:
    ///   - digests: The entries' digests.
    ///   - reason: Why they go, for the debug log, after "Evicted … from disk" (`" (lru)"`); `nil` for
    ///     no log line.
    ///   - log: Collects the log lines, written once the locks are released.
    /// - Returns: The keys the files held, in the order of `digests`; `nil` for a file whose key
    ///   cannot be read (already gone, or damaged).
    /// - Complexity: O(n) file reads and removals.
    @discardableResult
    func removeEntryFiles(
        _ digests: [SHA256Digest],
        evictedFor reason: String? = nil,
        log: inout DeferredLog
    ) -> [String?] {
        guard !digests.isEmpty else { return [] }
        let keys = storedKeys(of: digests)
        // Journaled first, like every change: a kill in between leaves an uncommitted section,
        // which the next reader checks against the files.
        journal(zip(digests, keys).map { .remove(digest: $0, key: $1) }, log: &log)
        for (digest, key) in zip(digests, keys) {
            if let reason {
                let name = key.map { "\"\($0.prefix(100))\"" } ?? "the entry file \(digest.hex)"
                log.add(.debug, "Evicted \(name) from disk\(reason).")
            }
            removeFile(digest.hex, log: &log)
        }
        return keys
    }
}
