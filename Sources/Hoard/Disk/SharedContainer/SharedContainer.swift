import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What every store and every process on one container shares: the section lock that orders their
/// changes (see ``ContainerLock``), the index file whose journal tells each of them what the others
/// changed (see ``DiskJournal``), and the manifest that says what the container holds (see
/// ``ContainerManifest``).
///
/// The disk store keeps its index and its entry files, and calls into this type for all that other
/// processes see, in this order in each of its sections (see `DiskStore.withContainer(log:news:_:)`):
/// - ``withSection(_:)`` takes the section lock;
/// - ``catchUp(_:lookup:log:)`` reads what others journaled since the store last looked, and returns
///   the changes for the store to apply to its index: it changes nothing of the store's;
/// - ``journal(_:cursor:log:)`` appends each change before the store makes it, and
///   ``commit(_:log:)`` ends the section;
/// - ``writeSnapshot(_:cursor:log:)`` replaces the index file when its journal has grown long.
///
/// The type is a value of constants. What moves is the ``Cursor`` (the store's opening of the index
/// file, and how far it has read and written the journal): the store keeps it in its state, because
/// its byte budget reads the journal's size under the state lock, and passes it `inout` to each call
/// that moves it, inside a section and holding its `ioLock`, the only place where it changes.
///
/// The folder holds one file per concern:
/// - `SharedContainer.swift`: the type, the cursor, the section and the appends;
/// - `SharedContainer+CatchingUp.swift`: reading what others journaled, and the changes it finds;
/// - `SharedContainer+Snapshots.swift`: writing a new snapshot;
/// - `ContainerManifest.swift`: the manifest, and the check of what the container holds;
/// - `ContainerLock.swift`: the lock file, its section and lifetime locks;
/// - `DiskJournal.swift`: the journal's records and their format.
struct SharedContainer: Sendable {
    /// The container's folder, whose entry files are the store's.
    let directory: Directory
    /// The eviction policy of the index a snapshot loads into.
    let policy: EvictionPolicy
    /// The capacity of the index a snapshot loads into.
    let capacity: Int

    /// The store's opening of the container's index file, and how far it has read the journal.
    ///
    /// Changed only holding the store's `ioLock` and the container's section lock.
    struct Cursor: Sendable {
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

    /// Runs `body` holding the container's section lock: no other thread of this process and no
    /// other process changes the container's files meanwhile (see ``ContainerLock/withSection(_:_:)``).
    ///
    /// The caller holds the store's `ioLock` (or is opening the store) and no state lock; `body`
    /// must not call user code.
    func withSection<Result>(_ body: (ContainerLock.SectionAccess) throws -> Result) rethrows -> Result {
        try directory.withSection(body)
    }

    /// The process the lock file names as in a section, if any: when no section is under way, one
    /// that died in the middle of one.
    var writerInSection: Int32? { directory.writerInSection }

    /// The bytes of the container's own files besides the index (its manifest and its lock file);
    /// written once, they count against the byte limit with the index.
    var fixedFileBytes: Int {
        (directory.size(of: ContainerFile.manifest) ?? 0) + max(directory.size(of: ContainerFile.lock) ?? 0, 40)
    }

    // MARK: - Appending

    /// Appends records to the journal, opening the section's records with `begin` if they are its
    /// first; called inside a section.
    ///
    /// - Returns: Success when the records are in the journal; otherwise the failed call (no space
    ///   left, an I/O error, no index file open and why), and the caller must not make the change
    ///   they describe, except a removal: an entry that other processes still count after its file is
    ///   gone heals itself when they next read it.
    func journal(
        _ records: [DiskJournal.Record],
        cursor: inout Cursor,
        log: inout DeferredLog
    ) -> Result<Void, CacheError.FileError> {
        guard !records.isEmpty else { return .success(()) }
        return append(cursor.hasBegun ? records : [.begin] + records, cursor: &cursor, log: &log)
    }

    /// Ends the section's records with `commit`, if it journaled any; called at the end of a section.
    func commit(_ cursor: inout Cursor, log: inout DeferredLog) {
        if cursor.hasBegun { append([.commit], cursor: &cursor, log: &log) }
    }

    /// Appends records as they are; the first of a section must be `begin`.
    ///
    /// A failed or short append is cut off again, so the journal ends with whole records and the
    /// cursor's offset is the file's end; when even that fails, the next section writes a snapshot,
    /// which replaces the file.
    @discardableResult
    private func append(
        _ records: [DiskJournal.Record],
        cursor: inout Cursor,
        log: inout DeferredLog
    ) -> Result<Void, CacheError.FileError> {
        let bytes = DiskJournal.encode(records)
        let path = directory.path + "/" + ContainerFile.index
        guard cursor.descriptor >= 0 else {
            // No index file open (it could not be written): the next section's snapshot holds the change.
            cursor.records = Int.max / 2
            return .failure(
                cursor.unavailable ?? CacheError.FileError(operation: "write", path: path, errorNumber: EBADF)
            )
        }
        var written: Bool
        if let limit = Self.testHooks.takeAppendLimit(at: directory.path) {
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
            cursor.offset += bytes.count
            cursor.records += records.count
            cursor.bytes += bytes.count
            cursor.hasBegun = records.last != .commit
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
            cursor.records = Int.max / 2
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

extension SharedContainer {
    /// The faults tests inject into the journals of this process's containers.
    static let testHooks = JournalTestHooks()
}
