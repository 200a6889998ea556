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
    /// The caller holds neither lock of any disk store; `body` may take the state lock and must not
    /// call user code or observers. What other processes changed is added to `news`.
    func withContainer<Result>(
        log: inout DeferredLog,
        news: inout PeerNews,
        _ body: (inout DeferredLog, _ isCurrent: Bool) throws -> Result
    ) rethrows -> Result {
        try withIOLock {
            try directory.withSection {
                let isCurrent = catchUp(log: &log, news: &news)
                let result = try body(&log, isCurrent)
                if withState({ $0.journal.hasBegun }) { append([.commit], log: &log) }
                // Not while the index loads: opening writes no temporary file; the first write compacts.
                if withState({ $0.isLoaded && $0.journal.records >= $0.indexSaveThreshold }) { compact(log: &log) }
                return result
            }
        }
    }

    /// Like ``withContainer(log:news:_:)``, then logs and tells this process's caches what other
    /// processes changed.
    func withContainer<Result>(_ body: (inout DeferredLog) throws -> Result) rethrows -> Result {
        var messages = DeferredLog()
        var news = PeerNews()
        defer {
            messages.flush()
            news.deliver(to: self)
        }
        return try withContainer(log: &messages, news: &news) { log, _ in try body(&log) }
    }

    // MARK: - Appending

    /// Appends records to the journal; called inside a section.
    ///
    /// A journal that cannot be appended to is replaced by a snapshot that holds the change (the
    /// caller has applied it to the index already, or does so next: the snapshot is then written
    /// by the next section).
    func journal(_ records: [DiskJournal.Record], log: inout DeferredLog) {
        guard !records.isEmpty else { return }
        append(withState({ $0.journal.hasBegun }) ? records : [.begin] + records, log: &log)
    }

    /// Appends records as they are; the first of a section must be `begin`.
    private func append(_ records: [DiskJournal.Record], log: inout DeferredLog) {
        let bytes = DiskJournal.encode(records)
        let cursor = withState { $0.journal }
        if cursor.descriptor >= 0 && RawIO.append(bytes, to: cursor.descriptor) {
            withState { state in
                state.journal.offset += bytes.count
                state.journal.records += records.count
                state.journal.hasBegun = records.last != .commit
            }
        } else {
            log.add(.warning, "Cannot append to the journal of \(directory.path) (errno \(errno)); writing a snapshot.")
            withState { state in
                state.journal.records = Int.max / 2
                state.journal.hasBegun = false
            }
        }
    }

    // MARK: - Catching up

    /// Applies what other processes appended since the store last looked, following the index file
    /// when another process replaced it; rebuilds from the entry files when it cannot be trusted.
    ///
    /// - Returns: Whether the store's index is the container's: `false` when the folder cannot be
    ///   searched or listed and the store has no index file open.
    @discardableResult
    func catchUp(log: inout DeferredLog, news: inout PeerNews) -> Bool {
        var cursor = withState { $0.journal }
        let current: FileIdentity?
        switch directory.identity(of: ContainerFile.index) {
        case .success(let identity):
            current = identity
        case .failure(let error):
            // The folder cannot be searched now (an unreadable spell): keep what this store knows.
            log.add(.warning, "Cannot look at the index of \(directory.path): \(error)")
            guard cursor.descriptor >= 0 else { return false }
            _ = readJournal(&cursor, truncatesTornTail: false, log: &log, news: &news)
            withState { $0.journal = cursor }
            return true
        }
        if cursor.descriptor >= 0 {
            let isCurrent = current == cursor.identity
            // Finish the file this store has open, even when it was replaced: its last records were
            // written before the snapshot that replaced it, which holds them.
            guard readJournal(&cursor, truncatesTornTail: isCurrent, log: &log, news: &news) else {
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
        if current != nil, open(into: &cursor, log: &log, news: &news) {
            withState { $0.journal = cursor }
            return true
        }
        return rebuild(replacing: &cursor, log: &log)
    }

    /// Opens the index file and loads its snapshot and journal into the store's index.
    ///
    /// - Returns: Whether the file is an intact index of this version.
    private func open(into cursor: inout JournalCursor, log: inout DeferredLog, news: inout PeerNews) -> Bool {
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
            let snapshot = bytes.withUnsafeBytes({ DiskIndexFile.decodeSnapshot($0) })
        else {
            close(file)
            return false
        }
        var index = DiskEntryIndex(policy: options.policy, capacity: options.capacity)
        for record in snapshot.records { index.append(record.info, forKey: record.digest, count: record.count) }
        withState { $0.index = index }
        cursor = JournalCursor(descriptor: file, identity: FileIdentity(status), offset: snapshot.end, records: 0)
        let applied = bytes.withUnsafeBytes { buffer in
            apply(UnsafeRawBufferPointer(rebasing: buffer[snapshot.end...]), to: &cursor, truncates: true, news: &news)
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
        truncatesTornTail: Bool,
        log: inout DeferredLog,
        news: inout PeerNews
    ) -> Bool {
        guard let bytes = RawIO.readToEnd(cursor.descriptor, from: cursor.offset) else {
            log.add(.warning, "Cannot read the journal of \(directory.path) (errno \(errno)).")
            return false
        }
        if bytes.isEmpty { return true }
        let applied = bytes.withUnsafeBytes { apply($0, to: &cursor, truncates: truncatesTornTail, news: &news) }
        if !applied {
            log.add(.warning, "The journal of \(directory.path) is damaged; rebuilding the index from the entry files.")
        }
        return applied
    }

    /// Applies journal bytes that start at the cursor's offset to the index, moving the cursor past
    /// them; cuts a torn last record off the file when `truncates`.
    ///
    /// - Returns: `false` when a record before the last one is damaged.
    private func apply(
        _ bytes: UnsafeRawBufferPointer,
        to cursor: inout JournalCursor,
        truncates: Bool,
        news: inout PeerNews
    ) -> Bool {
        let decoded = DiskJournal.decode(bytes)
        guard let records = settled(DiskJournal.sections(decoded.records)) else { return false }
        withState { state in
            for record in records { state.replay(record, news: &news) }
        }
        cursor.offset += decoded.end
        cursor.records += decoded.records.count
        switch decoded.ending {
        case .clean:
            return true
        case .tornTail:
            // A process died appending its last record; the bytes after the cursor are only that.
            if truncates { _ = ftruncate(cursor.descriptor, off_t(cursor.offset)) }
            return true
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
