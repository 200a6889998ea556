import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension DiskStore {
    /// Applies what other processes appended since the store last looked, following the index file
    /// when another process replaced it; rebuilds from the entry files when it cannot be trusted.
    ///
    /// - Parameters:
    ///   - log: Receives what went wrong.
    ///   - news: Receives what other processes changed.
    ///   - resolvedUncommitted: Set when a section that a killed process left uncommitted
    ///     was resolved against the files.
    /// - Returns: Success when the store's index is the container's; the failed call when the index
    ///   file cannot be looked at, or it cannot be read and the folder cannot be listed to rebuild it.
    ///   The store then keeps the index it has, which may miss other processes' changes.
    func catchUp(
        log: inout DeferredLog,
        news: inout PeerNews,
        resolvedUncommitted: inout Bool
    ) -> Result<Void, CacheError.FileError> {
        var cursor = withState { $0.journal }
        let current: FileIdentity?
        let injected = SharedContainer.testHooks.catchUpFails(at: directory.path)
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
                _ = readJournal(&cursor, isCurrentFile: false, log: &log, news: &news, resolved: &resolvedUncommitted)
                withState { $0.journal = cursor }
            }
            return .failure(error)
        }
        if cursor.descriptor >= 0 {
            let isCurrent = current == cursor.identity
            // Finish the file this store has open, even when it was replaced: its last records were
            // written before the snapshot that replaced it, which holds them.
            let intact = readJournal(
                &cursor,
                isCurrentFile: isCurrent,
                log: &log,
                news: &news,
                resolved: &resolvedUncommitted
            )
            // Damage in a replaced file does not matter: the snapshot that replaced it holds
            // everything, and opening it below replaces the index.
            if !intact && isCurrent { return rebuild(replacing: &cursor, log: &log) }
            if isCurrent {
                withState { $0.journal = cursor }
                return .success(())
            }
            close(cursor.descriptor)
            cursor = SharedContainer.Cursor()
            withState { $0.journal = cursor }
        }
        if current != nil, open(into: &cursor, log: &log, news: &news, resolved: &resolvedUncommitted) {
            withState { $0.journal = cursor }
            return .success(())
        }
        return rebuild(replacing: &cursor, log: &log)
    }

    /// Opens the index file and loads its snapshot and journal into the store's index.
    ///
    /// - Returns: Whether the file is an intact index of this version.
    private func open(
        into cursor: inout SharedContainer.Cursor,
        log: inout DeferredLog,
        news: inout PeerNews,
        resolved: inout Bool
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
        var index = DiskEntryIndex(policy: options.policy, capacity: options.capacity)
        for record in snapshot.records { index.append(record.info, forKey: record.digest, count: record.count) }
        withState { $0.index = index }
        cursor = SharedContainer.Cursor(descriptor: file, identity: FileIdentity(status), offset: snapshot.end)
        cursor.snapshotBytes = snapshot.end
        let applied = bytes.withUnsafeBytes { buffer in
            apply(
                UnsafeRawBufferPointer(rebasing: buffer[snapshot.end...]),
                to: &cursor,
                isCurrentFile: true,
                news: &news,
                resolved: &resolved
            )
        }
        guard applied else {
            close(file)
            cursor = SharedContainer.Cursor()
            log.add(.warning, "The journal of \(directory.path) is damaged; rebuilding the index from the entry files.")
            return false
        }
        return true
    }

    /// Reads and applies the journal records after the cursor; `false` when the journal is damaged.
    private func readJournal(
        _ cursor: inout SharedContainer.Cursor,
        isCurrentFile: Bool,
        log: inout DeferredLog,
        news: inout PeerNews,
        resolved: inout Bool
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
            apply($0, to: &cursor, isCurrentFile: isCurrentFile, news: &news, resolved: &resolved)
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

    /// Applies journal bytes that start at the cursor's offset to the index, moving the cursor past
    /// them.
    ///
    /// A torn tail is damage in the file the container uses now (`isCurrentFile`), and the end
    /// of the records in a replaced one.
    ///
    /// - Returns: `false` when a record before the last one is damaged.
    private func apply(
        _ bytes: UnsafeRawBufferPointer,
        to cursor: inout SharedContainer.Cursor,
        isCurrentFile: Bool,
        news: inout PeerNews,
        resolved: inout Bool
    ) -> Bool {
        let decoded = DiskJournal.decode(bytes)
        // In order: an uncommitted section is checked against the index as the sections before it
        // left it (an entry it removed may have been put earlier in this same read).
        for section in DiskJournal.sections(decoded.records) {
            guard let records = settled([section]) else { return false }
            if !section.isCommitted { resolved = true }
            withState { state in
                for record in records { state.replay(record, news: &news) }
            }
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

    /// The records to apply for `sections`: a committed section's as they are; for a section whose
    /// process died before committing it, what the files it names hold now.
    ///
    /// - Returns: `nil` when an uncommitted section holds a clear: which files it removed is unknown.
    private func settled(_ sections: [DiskJournal.Section]) -> [DiskJournal.Record]? {
        var records: [DiskJournal.Record] = []
        for section in sections {
            if section.isCommitted {
                records += section.records
                continue
            }
            var expiries: [SHA256Digest: Expiry?] = [:]
            var names: [SHA256Digest: String] = [:]
            var order: [SHA256Digest] = []
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
                case .begin, .commit:
                    break
                }
            }
            for digest in order {
                let indexed = withState { $0.index.peek(digest) }
                // The index keeps no keys: one the section did not journal is read from the file.
                guard let size = directory.size(of: digest.hex),
                    let key = names[digest] ?? storedKey(of: digest)
                else {
                    records.append(.remove(digest: digest, key: names[digest]))
                    continue
                }
                // An expiry the file may not hold (the rename may not have happened): reads check
                // the file's own; only `removeExpired` and the key listings go by this one.
                let expiresAt = (expiries[digest] ?? nil) ?? indexed?.expiresAt ?? .never
                records.append(.put(digest: digest, size: size, expiresAt: expiresAt, key: key))
            }
        }
        return records
    }

    /// Rebuilds the index from the entry files, then writes it as a new snapshot; called inside a
    /// section (or while opening).
    ///
    /// - Returns: The failed call when the folder cannot be listed (the store keeps the index it has).
    private func rebuild(
        replacing cursor: inout SharedContainer.Cursor,
        log: inout DeferredLog
    ) -> Result<Void, CacheError.FileError> {
        if cursor.descriptor >= 0 { close(cursor.descriptor) }
        cursor = SharedContainer.Cursor()
        withState { $0.journal = SharedContainer.Cursor() }
        if directory.isOpenFolderGone {
            // The container was deleted: nothing is left in it. It is made again with an empty index,
            // which this section's changes are journaled to.
            withState { $0.index.removeAll() }
            compact(log: &log)
            return .success(())
        }
        // A folder that cannot be listed keeps the index this store has.
        return rebuildIndex(log: &log).map { index in
            withState { $0.index = index }
            compact(log: &log)
        }
    }
}

extension DiskStore.State {
    /// Applies a record another process journaled.
    mutating func replay(_ record: DiskJournal.Record, news: inout DiskStore.PeerNews) {
        switch record {
        case .put(let digest, let size, let expiresAt, let key):
            index.upsert(DiskEntryInfo(size: size, expiresAt: expiresAt), forKey: digest)
            // Another process wrote the file: it holds that process's value, which may be served.
            unremovable.remove(digest)
            news.changedKeys.append(key)
        case .remove(let digest, let key):
            // A removal whose key could not be read (its file was damaged) changes no key a peer
            // can name.
            if index.removeValue(forKey: digest) != nil, let key { news.changedKeys.append(key) }
        case .clear:
            index.removeAll()
            news.isCleared = true
            news.changedKeys.removeAll()
        case .begin, .commit:
            break
        }
    }
}
