import Foundation

extension DiskStore {
    /// Runs `body` holding `ioLock` and the container's section lock, once the store has applied
    /// what other processes journaled; writes a snapshot afterwards when the journal has grown long.
    ///
    /// `isCurrent` tells `body` whether the store caught up: when it is `false` (the index file
    /// cannot be looked at or read, the folder cannot be listed, the section lock was refused; see
    /// ``ContainerLock/withSection(_:_:)``), the store's index may miss other
    /// processes' changes, so `body` must change no file, and no snapshot is written. When a process
    /// died in the middle of a section, the section resolved the entries it named and swept the
    /// temporary files it left; `body` then runs after the count and byte limits are made to hold again.
    ///
    /// The caller holds neither lock of any disk store; `body` may take the state lock and must not
    /// call user code or observers. What other processes changed is added to `news`.
    func withContainer<Result>(
        log: inout DeferredLog,
        news: inout PeerNews,
        _ body: (inout DeferredLog, _ isCurrent: Bool) throws -> Result
    ) rethrows -> Result {
        try withIOLock {
            try container.withSection { access in
                if case .refused(let reason) = access {
                    // Not even the journal is read: a peer may be appending to it right now.
                    let behind = CacheError.io("Cannot change the container \(directory.path): \(reason).")
                    log.add(.warning, behind.message)
                    withState { $0.journal.behind = behind }
                    return try body(&log, false)
                }
                var resolved = false
                let caughtUp = catchUp(log: &log, news: &news, resolvedUncommitted: &resolved)
                var behind: CacheError?
                if case .failure(let error) = caughtUp {
                    behind = .io("Cannot read what other processes changed in \(directory.path).", underlying: error)
                }
                let isCurrent = behind == nil
                withState { $0.journal.behind = behind }
                defer {
                    withState { $0.temporaryNamesListed = nil }
                    if withState({ $0.journal.hasBegun }) { withJournalCursor { container.commit(&$0, log: &log) } }
                    // Not while the index loads: opening writes no temporary file; the first write
                    // compacts. Never from a view that missed other processes' records.
                    if isCurrent && withState({ $0.isLoaded && $0.journalIsLong }) { compact(log: &log) }
                }
                if isCurrent && resolved && withState({ $0.isLoaded }) { enforceLimits(log: &log, news: &news) }
                // A process killed in its section may have left a temporary file, which no limit
                // counts and nothing else removes while the processes still running keep the
                // container open. (An opening sweeps anyway.)
                if case .granted(let interrupted?) = access, withState({ $0.isLoaded }) {
                    log.add(.info, "Process \(interrupted) died in a section on \(directory.path): sweeping its files.")
                    sweepTemporaryFiles(log: &log)
                }
                if isCurrent { journalSharedMarks(log: &log) }
                return try body(&log, isCurrent)
            }
        }
    }

    /// Records that `news`, which catching up gathered, was told to every cache of this process (or
    /// that none is left to tell): a clear by another process it holds no longer keeps fills off
    /// the disk, except those queued until now.
    ///
    /// A cache stores a fill only if it did not hear of a clear since the fill's read began, and
    /// queues its disk write under the same stripe lock: a fill queued from now on read its key
    /// after this process caught up with the clear.
    ///
    /// The same for each key another process put or removed: a fill of it queued until now does not
    /// land (see ``State/isOutdatedFill(_:)``).
    func didTell(_ news: PeerNews) {
        guard news.holdsPeerClear || !news.untoldChanges.isEmpty else { return }
        withState { state in
            if news.holdsPeerClear {
                state.peerClearsUntold -= 1
                state.clearedByPeersThrough = state.generation
            }
            for digest in news.untoldChanges {
                if let count = state.peerChangesUntold[digest], count > 1 {
                    state.peerChangesUntold[digest] = count - 1
                } else {
                    state.peerChangesUntold[digest] = nil
                }
                if state.pending[digest] != nil { state.changedByPeersThrough[digest] = state.generation }
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
            news.deliver(toEveryCacheOf: self)
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
                byteLimit: state.entryByteLimit(holding: state.index.count)
            )
        }
        guard !victims.isEmpty else { return }
        let keys = removeEntryFiles(
            victims.map(\.key),
            evictedFor: ": a process died before making room for its writes",
            log: &log
        )
        news.append(contentsOf: keys.compactMap { $0 })
        withState { $0.changesSinceSave += victims.count }
    }

    // MARK: - Catching up

    /// Applies what other processes appended since the store last looked, and rebuilds the index
    /// from the entry files when the index file cannot be trusted.
    ///
    /// Called inside a section; see ``SharedContainer/catchUp(_:lookup:log:)``.
    ///
    /// - Parameters:
    ///   - log: Receives what went wrong.
    ///   - news: Receives what other processes changed.
    ///   - resolvedUncommitted: Set when a section that a killed process left uncommitted
    ///     was resolved against the files.
    /// - Returns: Success when the store's index is the container's; the failed call when the index
    ///   file cannot be looked at, or it cannot be read and the folder cannot be listed to rebuild it.
    ///   The store then keeps the index it has, which may miss other processes' changes.
    private func catchUp(
        log: inout DeferredLog,
        news: inout PeerNews,
        resolvedUncommitted: inout Bool
    ) -> Result<Void, CacheError.FileError> {
        let lookup = SharedContainer.EntryLookup(
            indexedExpiry: { digest in self.withState { $0.index.peek(digest)?.expiresAt } },
            storedHeader: { digest in self.storedHeader(of: digest) }
        )
        var cursor = withState { $0.journal }
        var caughtUp = container.catchUp(&cursor, lookup: lookup, log: &log)
        var changes = caughtUp.takeChanges()
        let now = Date().timeIntervalSince1970
        withState { state in
            state.journal = cursor
            state.apply(&changes, news: &news, now: now)
            state.dropPassedSharedMarks(now: now)
        }
        if caughtUp.resolvedUncommitted { resolvedUncommitted = true }
        switch caughtUp.ending {
        case .current: return .success(())
        case .failed(let error): return .failure(error)
        case .rebuild: return rebuild(log: &log)
        }
    }

    /// Rebuilds the index from the entry files, then writes it as a new snapshot; called inside a
    /// section (or while opening), once catching up let go of an index file it could not trust.
    ///
    /// - Returns: The failed call when the folder cannot be listed (the store keeps the index it has).
    private func rebuild(log: inout DeferredLog) -> Result<Void, CacheError.FileError> {
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

    /// The error of a change that a section refused because it could not catch up with other
    /// processes: what it is, then why, with the failed call as the underlying error.
    func notCurrentError(_ change: String, key: String? = nil) -> CacheError {
        let behind = withState { $0.journal.behind } ?? CacheError.io("Cannot change the container \(directory.path).")
        return CacheError(
            code: .io,
            message: change + " " + behind.message,
            key: key,
            underlyingError: behind.underlyingError
        )
    }

    // MARK: - The journal cursor

    /// Appends records to the journal (see ``SharedContainer/journal(_:cursor:log:)``); called
    /// inside a section.
    ///
    /// - Returns: Success when the records are in the journal; otherwise the failed call, and the
    ///   caller must not make the change they describe, except a removal.
    @discardableResult
    func journal(_ records: [DiskJournal.Record], log: inout DeferredLog) -> Result<Void, CacheError.FileError> {
        guard !records.isEmpty else { return .success(()) }
        return withJournalCursor { container.journal(records, cursor: &$0, log: &log) }
    }

    /// Commits what the section journaled so far, then writes the index as a new snapshot with an
    /// empty journal, and makes it the file the store appends to; called inside a section (or while
    /// opening), once the changes journaled so far are made.
    ///
    /// - Complexity: O(n).
    func compact(log: inout DeferredLog) {
        let records = withState { $0.takeIndexSnapshot() }
        let isWritten = withJournalCursor { cursor in
            // The section's records end in the file they began in: once it is replaced, no commit
            // would follow them, and its readers would take them for a killed process's (and drop
            // a clear's news, which no snapshot carries).
            container.commit(&cursor, log: &log)
            return container.writeSnapshot(records, cursor: &cursor, log: &log)
        }
        if isWritten { journalLiveSharedMarks(log: &log) }
        // The journal stays the record: the changes it holds are not in a snapshot yet.
        if !isWritten { withState { $0.changesSinceSave += 1 } }
    }

    /// Runs `body` on the store's journal cursor, taken out of the state and put back once `body`
    /// returns; called inside a section, holding `ioLock`, the only place where the cursor changes.
    ///
    /// `body` must not call it again: the inner cursor would be overwritten by the outer one.
    func withJournalCursor<Result>(_ body: (inout SharedContainer.Cursor) throws -> Result) rethrows -> Result {
        var cursor = withState { $0.journal }
        defer { withState { $0.journal = cursor } }
        return try body(&cursor)
    }
}

extension DiskStore.State {
    /// Applies, in order, what catching up found that others changed, and adds the keys they
    /// changed to `news`; empties `changes`.
    ///
    /// - Complexity: O(c) in the number of changes: a snapshot's index is moved in, not copied.
    mutating func apply(_ changes: inout [SharedContainer.Change], news: inout PeerNews, now: Double) {
        // Taken out of the array one by one, so that a snapshot's index, once in the state, has no
        // other owner, and the changes after it update it in place.
        changes.reverse()
        while let change = changes.popLast() {
            switch change {
            case .load(let snapshot):
                index = snapshot
            case .put(let digest, let info, let key):
                index.upsert(info, forKey: digest)
                // Another process wrote the file: it holds that process's value, which may be served.
                unremovable.remove(digest)
                noteChangedByPeer(digest, news: &news)
                news.append(key)
            case .remove(let digest, let key):
                noteChangedByPeer(digest, news: &news)
                let hadFile = index.removeValue(forKey: digest) != nil
                // Told even when no file was counted: another process removes a key it holds no file
                // of when it hears the key changed on the shared level, and a read of it this process
                // has under way may predate that change (forgetting the key counts as a change of it,
                // which keeps such a read's value out of memory and off the disk). Not when this
                // process's own set of the key waits to land: it lands after the removal, so the
                // memory copy (that set's value) is the key's latest, and a read begun before the set
                // is refused by the set. A removal whose key could not be read (its file was damaged)
                // changes no key a peer can name.
                if let key, hadFile || !hasOwnSetPending(digest) { news.append(key) }
            case .clear:
                index.removeAll()
                // A fill queued so far read its key before that clear (its news reaches the caches
                // only now): landing it would put back a value the clear removed. So may one queued
                // until every cache has heard of it (see `peerClearsUntold`).
                clearedByPeersThrough = generation
                if news.clearByPeer() { peerClearsUntold += 1 }
            // A mark this store did not know of counts as a change of its key (every key): it goes
            // with a removal (a clear), already counted, except when a snapshot carried it and this
            // store opened the container only then. A read it made before it loaded the index may
            // have found the value removed on the shared level: neither memory nor the disk keeps it.
            // A mark it knew of (carried again) changes nothing, nor does one of its own that another
            // process carried after its snapshot: its caches wait for their own changes (0037).
            // A mark past its deadline holds nothing: the removal (the clear) it went with counts.
            case .sharedPending(let key, let until) where until <= now || ownSharedMarks[key] == until:
                break
            case .sharedPending(let key?, let until):
                guard until > peerSharedMarks[key] ?? -.infinity else { break }
                peerSharedMarks[key] = until
                noteChangedByPeer(DiskKey(key).digest, news: &news)
                news.append(key)
                if !isLoaded { newMarkNews.append(key) }
            case .sharedPending(nil, let until):
                guard until > peerSharedClearUntil else { break }
                peerSharedClearUntil = until
                clearedByPeersThrough = generation
                if news.clearByPeer() { peerClearsUntold += 1 }
                if !isLoaded { newMarkNews.clear() }
            }
        }
    }

    /// Whether the latest operation queued here for the key of `digest` is a write that is not a fill.
    private func hasOwnSetPending(_ digest: SHA256Digest) -> Bool {
        guard case .write(let value)? = pending[digest]?.operation else { return false }
        return !value.isFill
    }

    /// Notes that another process changed the key of `digest`: the fills of it queued so far must
    /// not land over that change (see ``isOutdatedFill(_:)``).
    private mutating func noteChangedByPeer(_ digest: SHA256Digest, news: inout PeerNews) {
        if pending[digest] != nil { changedByPeersThrough[digest] = generation }
        // A fill queued from now until the caches hear of the change does not land either.
        peerChangesUntold[digest, default: 0] += 1
        news.changedByPeer(digest)
    }
}
