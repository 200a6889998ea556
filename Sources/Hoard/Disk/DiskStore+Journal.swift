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
        /// Why no index file is open (`descriptor` is -1), when a call failed: what an append reports.
        var unavailable: CacheError.FileError?
        /// Why the current section could not catch up with other processes, if it could not: what
        /// a change refused for that reason reports (see ``DiskStore/notCurrentError(_:key:)``).
        var behind: CacheError?
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
                    if withState({ $0.journal.hasBegun }) { append([.commit], log: &log) }
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
                byteLimit: state.entryByteLimit(holding: state.index.count)
            )
        }
        guard !victims.isEmpty else { return }
        let keys = removeEntryFiles(
            victims.map(\.key),
            evictedFor: ": a process died before making room for its writes",
            log: &log
        )
        news.changedKeys += keys.compactMap { $0 }
        withState { $0.changesSinceSave += victims.count }
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

    // MARK: - Appending

    /// Appends records to the journal; called inside a section.
    ///
    /// - Returns: Success when the records are in the journal; otherwise the failed call (no space
    ///   left, an I/O error, no index file open and why), and the caller must not make the change
    ///   they describe, except a removal: an entry that other processes still count after its file is
    ///   gone heals itself when they next read it.
    @discardableResult
    func journal(_ records: [DiskJournal.Record], log: inout DeferredLog) -> Result<Void, CacheError.FileError> {
        guard !records.isEmpty else { return .success(()) }
        return append(withState({ $0.journal.hasBegun }) ? records : [.begin] + records, log: &log)
    }

    /// Appends records as they are; the first of a section must be `begin`.
    ///
    /// A failed or short append is cut off again, so the journal ends with whole records and the
    /// store's offset is the file's end; when even that fails, the next section writes a snapshot,
    /// which replaces the file.
    @discardableResult
    private func append(_ records: [DiskJournal.Record], log: inout DeferredLog) -> Result<Void, CacheError.FileError> {
        let bytes = DiskJournal.encode(records)
        let cursor = withState { $0.journal }
        let path = directory.path + "/" + ContainerFile.index
        guard cursor.descriptor >= 0 else {
            // No index file open (it could not be written): the next section's snapshot holds the change.
            withState { $0.journal.records = Int.max / 2 }
            return .failure(
                cursor.unavailable ?? CacheError.FileError(operation: "write", path: path, errorNumber: EBADF)
            )
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
            return .success(())
        }
        let failure = CacheError.FileError(operation: "write", path: path, errorNumber: number)
        log.add(.warning, "Cannot append to the journal of \(directory.path): \(failure); the change is not made.")
        // Whatever part of the records reached the file goes: the journal must end with whole records.
        var status = stat()
        var reason: String?
        if ftruncate(cursor.descriptor, off_t(cursor.offset)) != 0 {
            reason = CacheError.FileError(operation: "ftruncate", path: path, errorNumber: errno).description
        } else if fstat(cursor.descriptor, &status) != 0 {
            reason = CacheError.FileError(operation: "fstat", path: path, errorNumber: errno).description
        } else if Int(exactly: status.st_size) != cursor.offset {
            reason = "it is \(status.st_size) bytes long, not \(cursor.offset)"
        }
        if let reason {
            log.add(.warning, "Cannot cut the journal of \(directory.path) back (\(reason)); writing a snapshot.")
            withState { $0.journal.records = Int.max / 2 }
        }
        return .failure(failure)
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
