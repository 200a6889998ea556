import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension SharedContainer {
    /// Reads what other processes appended since the store last looked, following the index file
    /// when another process replaced it, and returns the changes for the store to apply to its index.
    ///
    /// Changes nothing of the store's but `cursor`: the store applies ``CatchUp/changes`` in order,
    /// then does what ``CatchUp/ending`` says (rebuild its index from the entry files when the index
    /// file cannot be trusted). Called inside a section.
    ///
    /// - Parameters:
    ///   - cursor: How far the store has read the index file; moved past what was read.
    ///   - lookup: What the store knows of the entries that a section left uncommitted names.
    ///   - log: Receives what went wrong.
    /// - Returns: The changes, and whether the store's index is the container's once they are applied.
    func catchUp(_ cursor: inout Cursor, lookup: EntryLookup, log: inout DeferredLog) -> CatchUp {
        var found = CatchUp()
        let current: FileIdentity?
        let injected = Self.testHooks.catchUpFails(at: directory.path)
        switch injected
            ? .failure(directory.error("fstatat", ContainerFile.index, EMFILE))
            : directory.identity(of: ContainerFile.index)
        {
        case .success(let identity):
            current = identity
        case .failure(let error):
            // The folder cannot be searched now (too many open files, an unreadable spell): another
            // process may have replaced the index, so what this store knows may be stale.
            log.add(.warning, "Cannot look at the index of \(directory.path): \(error)")
            if cursor.descriptor >= 0 {
                _ = readJournal(&cursor, isCurrentFile: false, into: &found, lookup: lookup, log: &log)
            }
            found.ending = .failed(error)
            return found
        }
        if cursor.descriptor >= 0 {
            let isCurrent = current == cursor.identity
            // Finish the file this store has open, even when it was replaced: its last records were
            // written before the snapshot that replaced it, which holds them.
            let intact = readJournal(&cursor, isCurrentFile: isCurrent, into: &found, lookup: lookup, log: &log)
            // Damage in a replaced file does not matter: the snapshot that replaced it holds
            // everything, and opening it below replaces the index.
            if !intact && isCurrent { return untrusted(&cursor, found) }
            if isCurrent { return found }
            close(cursor.descriptor)
            cursor = Cursor()
        }
        if current != nil, open(into: &cursor, found: &found, lookup: lookup, log: &log) { return found }
        return untrusted(&cursor, found)
    }

    /// Lets go of an index file that cannot be trusted: the store rebuilds its index from the entry files.
    private func untrusted(_ cursor: inout Cursor, _ found: CatchUp) -> CatchUp {
        if cursor.descriptor >= 0 { close(cursor.descriptor) }
        cursor = Cursor()
        var found = found
        found.ending = .rebuild
        return found
    }

    /// Opens the index file and loads its snapshot, then its journal.
    ///
    /// - Returns: Whether the file is an intact index of this version.
    private func open(
        into cursor: inout Cursor,
        found: inout CatchUp,
        lookup: EntryLookup,
        log: inout DeferredLog
    ) -> Bool {
        let file: Int32
        do {
            guard let opened = try directory.open(ContainerFile.index, flags: O_RDWR | O_APPEND) else { return false }
            file = opened
        } catch {
            log.add(
                .warning,
                "Cannot open the index of \(directory.path): \(error); rebuilding it from the entry files."
            )
            return false
        }
        var status = stat()
        guard fstat(file, &status) == 0, let bytes = RawIO.readToEnd(file, from: 0),
            let snapshot = bytes.withUnsafeBytes({ DiskIndexFile.decodeOpenableSnapshot($0) }),
            !isCutShort(FileIdentity(status), length: bytes.count, log: &log)
        else {
            close(file)
            return false
        }
        var index = DiskEntryIndex(policy: policy, capacity: capacity)
        // Room for every record at once; each is still looked up, as a damaged file may repeat one.
        index.reserveCapacity(snapshot.records.count)
        for record in snapshot.records { index.append(record.info, forKey: record.digest, count: record.count) }
        found.append(.load(index))
        cursor = Cursor(descriptor: file, identity: FileIdentity(status), offset: snapshot.end)
        cursor.snapshotBytes = snapshot.end
        let applied = bytes.withUnsafeBytes { buffer in
            replay(
                UnsafeRawBufferPointer(rebasing: buffer[snapshot.end...]),
                to: &cursor,
                isCurrentFile: true,
                found: &found,
                lookup: lookup
            )
        }
        guard applied else {
            close(file)
            cursor = Cursor()
            log.add(.warning, "The journal of \(directory.path) is damaged; rebuilding the index from the entry files.")
            return false
        }
        return true
    }

    /// Reads the journal records after the cursor; `false` when the journal is damaged.
    private func readJournal(
        _ cursor: inout Cursor,
        isCurrentFile: Bool,
        into found: inout CatchUp,
        lookup: EntryLookup,
        log: inout DeferredLog
    ) -> Bool {
        guard let bytes = RawIO.readToEnd(cursor.descriptor, from: cursor.offset) else {
            let failure = CacheError.FileError(
                operation: "pread",
                path: directory.path + "/" + ContainerFile.index,
                errorNumber: errno
            )
            log.add(.warning, "Cannot read the journal of \(directory.path): \(failure).")
            return false
        }
        if isCurrentFile, let identity = cursor.identity,
            isCutShort(identity, length: cursor.offset + bytes.count, log: &log)
        {
            return false
        }
        if bytes.isEmpty { return true }
        let applied = bytes.withUnsafeBytes {
            replay($0, to: &cursor, isCurrentFile: isCurrentFile, found: &found, lookup: lookup)
        }
        if !applied && isCurrentFile {
            log.add(.warning, "The journal of \(directory.path) is damaged; rebuilding the index from the entry files.")
        }
        return applied
    }

    /// Whether the index file `identity` is shorter than its last writer recorded: it was cut short,
    /// and whole records may be missing from its end, which its checksums cannot tell.
    ///
    /// Only the lengths are compared: a file copied into its place (a restored backup, a copy of a
    /// damaged file) has another inode, and is as suspect as one cut in place. A kill between a
    /// snapshot and its record costs one needless rebuild.
    private func isCutShort(_ identity: FileIdentity, length: Int, log: inout DeferredLog) -> Bool {
        guard let recorded = directory.recordedIndexEnd, length < recorded.length else { return false }
        let same = recorded.identity == identity ? "" : " (as another file)"
        log.add(
            .warning,
            "The index of \(directory.path) is \(length) bytes, \(recorded.length) when last written\(same); "
                + "rebuilding it from the entry files."
        )
        return true
    }

    /// Adds the changes of journal bytes that start at the cursor's offset to `found`, moving the
    /// cursor past them.
    ///
    /// A torn tail is damage in the file the container uses now (`isCurrentFile`), and the end
    /// of the records in a replaced one.
    ///
    /// - Returns: `false` when a record before the last one is damaged.
    private func replay(
        _ bytes: UnsafeRawBufferPointer,
        to cursor: inout Cursor,
        isCurrentFile: Bool,
        found: inout CatchUp,
        lookup: EntryLookup
    ) -> Bool {
        let decoded = DiskJournal.decode(bytes)
        // In order: an uncommitted section is checked against the index as the sections before it
        // left it (an entry it removed may have been put earlier in this same read).
        for section in DiskJournal.sections(decoded.records) {
            guard let changes = settled(section, found: found, lookup: lookup) else { return false }
            if !section.isCommitted { found.resolvedUncommitted = true }
            for change in changes { found.append(change) }
        }
        cursor.offset += decoded.end
        cursor.records += decoded.records.count
        cursor.bytes += decoded.end
        switch decoded.ending {
        case .clean:
            return true
        case .tornTail:
            // A process killed in the middle of an append leaves this, and cutting it off would be
            // enough (it journals before it renames or unlinks), but so does a file cut short by
            // damage, which may have lost whole committed records that nothing else would tell:
            // the current file is rebuilt from the entry files. A replaced file's records are in
            // the snapshot that replaced it.
            return !isCurrentFile
        case .damaged:
            return false
        }
    }

    /// The changes of `section`: a committed section's records as they are; for a section whose
    /// process died before committing it, what the files it names hold now.
    ///
    /// - Returns: `nil` when an uncommitted section holds a clear: which files it removed is unknown.
    private func settled(_ section: DiskJournal.Section, found: CatchUp, lookup: EntryLookup) -> [Change]? {
        if section.isCommitted { return section.records.compactMap(Change.init) }
        var expiries: [SHA256Digest: Expiry?] = [:]
        var names: [SHA256Digest: String] = [:]
        var order: [SHA256Digest] = []
        // A killed process's marks still hold until their deadline: its queued shared changes may
        // still be made by a connection that outlives it, or not; the deadline bounds the wait.
        var changes: [Change] = []
        for record in section.records {
            switch record {
            case .put(let digest, _, let expiresAt, let key):
                if expiries[digest] == nil { order.append(digest) }
                expiries[digest] = expiresAt
                names[digest] = key
            case .remove(let digest, let key):
                if expiries[digest] == nil {
                    order.append(digest)
                    expiries[digest] = .some(nil)
                }
                if let key { names[digest] = key }
            case .clear:
                return nil
            case .sharedPending(let key, let until):
                changes.append(.sharedPending(key: key, until: until))
            case .begin, .commit:
                break
            }
        }
        for digest in order {
            // The expiry of a put the section journaled, whose rename may not have happened.
            let journaled = expiries[digest] ?? nil
            let indexed = journaled == nil ? found.indexedExpiry(of: digest, lookup: lookup) : nil
            // The file's header tells what it holds: the index keeps no keys, and a file the put did
            // not replace holds an older value, with the expiry that value was given.
            let header = journaled != nil || indexed == nil || names[digest] == nil ? lookup.storedHeader(digest) : nil
            guard let size = directory.size(of: digest.hex), let key = names[digest] ?? header?.key else {
                changes.append(.remove(digest, key: names[digest]))
                continue
            }
            // After a put, the file's own expiry, never the journaled one: `removeExpired` and the key
            // listings go by the index's, and would drop a live value or list an expired one. A file
            // the section only meant to remove is still the one the index counted.
            let expiresAt = journaled.map { header?.expiresAt ?? $0 } ?? indexed ?? header?.expiresAt ?? .never
            changes.append(.put(digest, DiskEntryInfo(size: size, expiresAt: expiresAt), key: key))
        }
        return changes
    }
}
