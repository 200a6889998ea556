import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension DiskStore {
    /// The store's opening of the container's index file, and how far it has read the journal.
    ///
    /// Changed only holding `ioLock` and the container's section lock.
    struct JournalCursor: Sendable {
        /// The index file, open for reading and appending; -1 when the store has none open.
        var descriptor: Int32 = -1
        /// The file's identity: another one under the index's name means another process wrote a
        /// new snapshot.
        var identity: FileIdentity?
        /// The offset up to which the store has applied the journal (its own records included).
        var offset = 0
        /// The journal records after the snapshot.
        var records = 0
        /// The journal's bytes after the snapshot, and the snapshot's own.
        var bytes = 0
        var snapshotBytes = 0
        /// Whether the current section has journaled its `begin` (and owes a `commit`).
        var hasBegun = false
    }

    /// What other processes changed, for this process's caches to forget their copies.
    struct PeerNews {
        var changedKeys: [String] = []
        var isCleared = false

        /// Tells every cache of the store, outside every lock.
        func deliver(to store: DiskStore) {
            guard isCleared || !changedKeys.isEmpty else { return }
            for observer in store.observers(except: nil) {
                if isCleared { observer.diskStoreDidClear() }
                for key in changedKeys { observer.diskStoreDidChange(key: key) }
            }
        }
    }

    /// Runs `body` holding `ioLock` and the container's section lock, once the store has applied
    /// what other processes journaled; writes a snapshot afterwards when the journal has grown long.
    ///
    /// `isCurrent` tells `body` whether the store caught up: when it is `false` (the index file
    /// cannot be looked at or read, the folder cannot be listed, the section lock was refused; see
    /// ``ContainerLock/withSection(_:_:)``), the store's index may miss other
    /// processes' changes, so `body` must change no file, and no snapshot is written. When a process
    /// died in the middle of a section, the section resolved the entries it named; `body` then runs
    /// after the count and byte limits are made to hold again.
    ///
    /// The caller holds neither lock of any disk store; `body` may take the state lock and must not
    /// call user code or observers. What other processes changed is added to `news`.
    func withContainer<Result>(
        log: inout DeferredLog,
        news: inout PeerNews,
        _ body: (inout DeferredLog, _ isCurrent: Bool) throws -> Result
    ) rethrows -> Result {
        try withIOLock {
            try directory.withSection { access in
                if case .refused(let reason) = access {
                    // Not even the journal is read: a peer may be appending to it right now.
                    log.add(.warning, "Cannot change the container \(directory.path): \(reason).")
                    return try body(&log, false)
                }
                var resolved = false
                let isCurrent = catchUp(log: &log, news: &news, resolvedUncommitted: &resolved)
                defer {
                    if withState({ $0.journal.hasBegun }) { _ = append([.commit], log: &log) }
                    // Not while the index loads: opening writes no temporary file; the first write
                    // compacts. Never from a view that missed other processes' records.
                    if isCurrent && withState({ $0.isLoaded && $0.journalIsLong }) { compact(log: &log) }
                }
                if isCurrent && resolved && withState({ $0.isLoaded }) { enforceLimits(log: &log, news: &news) }
                return try body(&log, isCurrent)
            }
        }
    }

    /// Like ``withContainer(log:news:_:)``, then logs and tells this process's caches what other
    /// processes changed.
    ///
    /// - Returns: What `body` returned, or `nil` when the store could not catch up with other
    ///   processes (`body` did not run: it would have changed files from a stale view).
    func withContainer<Result>(_ body: (inout DeferredLog) throws -> Result) rethrows -> Result? {
        var messages = DeferredLog()
        var news = PeerNews()
        defer {
            messages.flush()
            news.deliver(to: self)
        }
        return try withContainer(log: &messages, news: &news) { log, isCurrent in
            guard isCurrent else {
                log.add(.warning, "Cannot read what other processes changed in \(directory.path); changed nothing.")
                return nil
            }
            return try body(&log)
        }
    }

    /// Evicts what no longer fits after a section that a killed process left uncommitted was
    /// resolved (its new entries may have gone past the limits before it journaled its evictions);
    /// journals the removals in this section, so every process applies the same ones.
    private func enforceLimits(log: inout DeferredLog, news: inout PeerNews) {
        let victims = withState { state in
            state.index.makeRoom(
                forCount: 0,
                bytes: 0,
                capacity: options.capacity,
                byteLimit: options.byteLimit
            )
        }
        guard !victims.isEmpty else { return }
        _ = journal(victims.map { .remove(digest: $0.key) }, log: &log)
        for victim in victims {
            log.add(
                .debug,
                "Evicted \"\(victim.payload.key.prefix(100))\" from disk: a process died before making room for its writes."
            )
            removeFile(victim.key.hex, log: &log)
            news.changedKeys.append(victim.payload.key)
        }
        withState { $0.changesSinceSave += victims.count }
    }

    // MARK: - Appending

    /// Appends records to the journal; called inside a section.
    ///
    /// - Returns: Whether the records are in the journal. When they are not (no space left, an I/O
    ///   error), the caller must not make the change they describe, except a removal: an entry that
    ///   other processes still count after its file is gone heals itself when they next read it.
    @discardableResult
    func journal(_ records: [DiskJournal.Record], log: inout DeferredLog) -> Bool {
        guard !records.isEmpty else { return true }
        return append(withState({ $0.journal.hasBegun }) ? records : [.begin] + records, log: &log)
    }

    /// Appends records as they are; the first of a section must be `begin`.
    ///
    /// A failed or short append is cut off again, so the journal ends with whole records and the
    /// store's offset is the file's end; when even that fails, the next section writes a snapshot,
    /// which replaces the file.
    private func append(_ records: [DiskJournal.Record], log: inout DeferredLog) -> Bool {
        let bytes = DiskJournal.encode(records)
        let cursor = withState { $0.journal }
        guard cursor.descriptor >= 0 else {
            // No index file open (it could not be written): the next section's snapshot holds the change.
            withState { $0.journal.records = Int.max / 2 }
            return false
        }
        var written: Bool
        if let limit = Self.journalTestHooks.takeAppendLimit(at: directory.path) {
            // A disk that fills up part way: the first `limit` bytes land, the rest fails.
            written = RawIO.append(Array(bytes.prefix(limit)), to: cursor.descriptor) && limit >= bytes.count
            errno = ENOSPC
        } else {
            written = RawIO.append(bytes, to: cursor.descriptor)
        }
        let number = errno
        if written {
            if let identity = cursor.identity {
                directory.recordIndexEnd(identity: identity, length: cursor.offset + bytes.count)
            }
            withState { state in
                state.journal.offset += bytes.count
                state.journal.records += records.count
                state.journal.bytes += bytes.count
                state.journal.hasBegun = records.last != .commit
            }
            return true
        }
        log.add(
            .warning,
            "Cannot append to the journal of \(directory.path) (\(String(cString: strerror(number)))); "
                + "the change is not made."
        )
        // Whatever part of the records reached the file goes: the journal must end with whole records.
        var status = stat()
        if ftruncate(cursor.descriptor, off_t(cursor.offset)) != 0 || fstat(cursor.descriptor, &status) != 0
            || Int(exactly: status.st_size) != cursor.offset
        {
            log.add(.warning, "Cannot cut the journal of \(directory.path) back; writing a snapshot.")
            withState { $0.journal.records = Int.max / 2 }
        }
        return false
    }

    // MARK: - Catching up

    /// Applies what other processes appended since the store last looked, following the index file
    /// when another process replaced it; rebuilds from the entry files when it cannot be trusted.
    ///
    /// - Parameters:
    ///   - log: Receives what went wrong.
    ///   - news: Receives what other processes changed.
    ///   - resolvedUncommitted: Set when a section that a killed process left uncommitted
    ///     was resolved against the files.
    /// - Returns: Whether the store's index is the container's: `false` when the index file cannot
    ///   be looked at, or it cannot be read and the folder cannot be listed to rebuild it. The store
    ///   then keeps the index it has, which may miss other processes' changes.
    func catchUp(log: inout DeferredLog, news: inout PeerNews, resolvedUncommitted: inout Bool) -> Bool {
        var cursor = withState { $0.journal }
        let current: FileIdentity?
        let injected = Self.journalTestHooks.catchUpFails(at: directory.path)
        switch injected
            ? .failure(directory.error("stat", ContainerFile.index, EMFILE))
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
            return false
        }
        if cursor.descriptor >= 0 {
            let isCurrent = current == cursor.identity
            // Finish the file this store has open, even when it was replaced: its last records were
            // written before the snapshot that replaced it, which holds them.
            guard readJournal(&cursor, isCurrentFile: isCurrent, log: &log, news: &news, resolved: &resolvedUncommitted)
            else {
                return rebuild(replacing: &cursor, log: &log)
            }
            if isCurrent {
                withState { $0.journal = cursor }
                return true
            }
            close(cursor.descriptor)
            cursor = JournalCursor()
            withState { $0.journal = cursor }
        }
        if current != nil, open(into: &cursor, log: &log, news: &news, resolved: &resolvedUncommitted) {
            withState { $0.journal = cursor }
            return true
        }
        return rebuild(replacing: &cursor, log: &log)
    }

    /// Opens the index file and loads its snapshot and journal into the store's index.
    ///
    /// - Returns: Whether the file is an intact index of this version.
    private func open(
        into cursor: inout JournalCursor,
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
            let snapshot = bytes.withUnsafeBytes({ DiskIndexFile.decodeSnapshot($0) }),
            !isCutShort(FileIdentity(status), length: bytes.count, log: &log)
        else {
            close(file)
            return false
        }
        var index = DiskEntryIndex(policy: options.policy, capacity: options.capacity)
        for record in snapshot.records { index.append(record.info, forKey: record.digest, count: record.count) }
        withState { $0.index = index }
        cursor = JournalCursor(descriptor: file, identity: FileIdentity(status), offset: snapshot.end)
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
            cursor = JournalCursor()
            log.add(.warning, "The journal of \(directory.path) is damaged; rebuilding the index from the entry files.")
            return false
        }
        return true
    }

    /// Reads and applies the journal records after the cursor; `false` when the journal is damaged.
    private func readJournal(
        _ cursor: inout JournalCursor,
        isCurrentFile: Bool,
        log: inout DeferredLog,
        news: inout PeerNews,
        resolved: inout Bool
    ) -> Bool {
        guard let bytes = RawIO.readToEnd(cursor.descriptor, from: cursor.offset) else {
            log.add(.warning, "Cannot read the journal of \(directory.path) (errno \(errno)).")
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
        if !applied {
            log.add(.warning, "The journal of \(directory.path) is damaged; rebuilding the index from the entry files.")
        }
        return applied
    }

    /// Whether the index file `identity` is shorter than its last writer recorded: it was cut short,
    /// and whole records may be missing from its end, which its checksums cannot tell.
    private func isCutShort(_ identity: FileIdentity, length: Int, log: inout DeferredLog) -> Bool {
        guard let recorded = directory.recordedIndexEnd, recorded.identity == identity, length < recorded.length
        else { return false }
        log.add(
            .warning,
            "The index of \(directory.path) is \(length) bytes, \(recorded.length) when last written; "
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
        to cursor: inout JournalCursor,
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
            var keys: [SHA256Digest: (key: String, expiresAt: Expiry)?] = [:]
            var order: [SHA256Digest] = []
            for record in section.records {
                switch record {
                case .put(let digest, _, let expiresAt, let key):
                    if keys[digest] == nil { order.append(digest) }
                    keys[digest] = (key, expiresAt)
                case .remove(let digest):
                    if keys[digest] == nil {
                        order.append(digest)
                        keys[digest] = .some(nil)
                    }
                case .clear:
                    return nil
                case .begin, .commit:
                    break
                }
            }
            for digest in order {
                let known = keys[digest] ?? nil
                let indexed = withState { $0.index.peek(digest) }
                guard let size = directory.size(of: digest.hex),
                    let key = known?.key ?? indexed?.key
                else {
                    records.append(.remove(digest: digest))
                    continue
                }
                // An expiry the file may not hold (the rename may not have happened): reads check
                // the file's own; only `removeExpired` and the key listings go by this one.
                let expiresAt = known?.expiresAt ?? indexed?.expiresAt ?? .never
                records.append(.put(digest: digest, size: size, expiresAt: expiresAt, key: key))
            }
        }
        return records
    }

    // MARK: - Snapshots

    /// Writes the index as a new snapshot with an empty journal, and makes it the file the store
    /// appends to; called inside a section (or while opening).
    func compact(log: inout DeferredLog) {
        let records = withState { $0.takeIndexSnapshot() }
        let bytes = DiskIndexFile.encode(records)
        do {
            // With no index yet (a new container, a rebuild), the file is written in place: readers
            // only read it under the section lock, and a kill leaves a short file, which fails its
            // checksum, rather than a temporary file. Otherwise it replaces the old one atomically,
            // so other stores finish reading the old journal through their descriptors.
            if case .success(nil) = directory.identity(of: ContainerFile.index) {
                try directory.writeNew(bytes, to: ContainerFile.index)
            } else {
                try directory.writeAtomically(bytes, to: ContainerFile.index, through: nextTemporaryName())
            }
        } catch {
            // The journal stays the record; the next section tries again.
            log.add(.warning, "Cannot save the index of \(directory.path): \(error)")
            withState { $0.changesSinceSave += 1 }
            return
        }
        var cursor = JournalCursor()
        if let file = try? directory.open(ContainerFile.index, flags: O_RDWR | O_APPEND) {
            var status = stat()
            if fstat(file, &status) == 0 {
                cursor = JournalCursor(descriptor: file, identity: FileIdentity(status), offset: bytes.count)
                cursor.snapshotBytes = bytes.count
                directory.recordIndexEnd(identity: FileIdentity(status), length: bytes.count)
            } else {
                close(file)
            }
        }
        // The new file holds this section's changes in its snapshot: no commit is owed to it.
        let old = withState { state in
            defer { state.journal = cursor }
            return state.journal.descriptor
        }
        if old >= 0 { close(old) }
    }

    /// Rebuilds the index from the entry files, then writes it as a new snapshot; called inside a
    /// section (or while opening).
    ///
    /// - Returns: `false` when the folder cannot be listed (the store keeps the index it has).
    private func rebuild(replacing cursor: inout JournalCursor, log: inout DeferredLog) -> Bool {
        if cursor.descriptor >= 0 { close(cursor.descriptor) }
        cursor = JournalCursor()
        withState { $0.journal = JournalCursor() }
        if directory.isOpenFolderGone {
            // The container was deleted: nothing is left in it. It is made again with an empty index,
            // which this section's changes are journaled to.
            withState { $0.index.removeAll() }
            compact(log: &log)
            return true
        }
        // A folder that cannot be listed keeps the index this store has.
        guard let index = rebuildIndex(log: &log) else { return false }
        withState { $0.index = index }
        compact(log: &log)
        return true
    }
}

extension DiskStore.State {
    /// Applies a record another process journaled.
    mutating func replay(_ record: DiskJournal.Record, news: inout DiskStore.PeerNews) {
        switch record {
        case .put(let digest, let size, let expiresAt, let key):
            index.upsert(DiskEntryInfo(key: key, size: size, expiresAt: expiresAt), forKey: digest)
            // Another process wrote the file: it holds that process's value, which may be served.
            unremovable.remove(digest)
            news.changedKeys.append(key)
        case .remove(let digest):
            if let removed = index.removeValue(forKey: digest) { news.changedKeys.append(removed.key) }
        case .clear:
            index.removeAll()
            news.isCleared = true
            news.changedKeys.removeAll()
        case .begin, .commit:
            break
        }
    }
}

/// Faults a test injects into the journal of the container at a real path; none is installed
/// outside tests.
final class JournalTestHooks: Sendable {
    private struct Faults {
        /// The next append writes only this many bytes, then fails as a full disk does.
        var appendLimit: Int?
        /// Every catch-up fails as if the index file could not be looked at (too many open files).
        var catchUpFails = false
    }

    private let faults = Locked<[String: Faults]>([:])

    /// Makes the next append to the journal at `path` write only `bytes` bytes, then fail.
    func failNextAppend(afterBytes bytes: Int, at path: String) {
        faults.withLock { $0[path, default: Faults()].appendLimit = bytes }
    }

    /// Makes every catch-up of the container at `path` fail, or succeed again.
    func setCatchUpFails(_ fails: Bool, at path: String) {
        faults.withLock { $0[path, default: Faults()].catchUpFails = fails }
    }

    /// Takes the limit of the next append at `path`, if one was injected.
    func takeAppendLimit(at path: String) -> Int? {
        faults.withLock { faults in
            defer { faults[path]?.appendLimit = nil }
            return faults[path]?.appendLimit
        }
    }

    /// Whether catch-ups of the container at `path` fail.
    func catchUpFails(at path: String) -> Bool {
        faults.withLock { $0[path]?.catchUpFails ?? false }
    }
}

extension DiskStore {
    static let journalTestHooks = JournalTestHooks()
}
