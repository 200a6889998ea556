import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension ContainerFile {
    /// The file whose advisory record locks (`fcntl`) coordinate the processes that share a container.
    ///
    /// Never an entry (not 64 hex digits) and never swept as a temporary file; it stays in the
    /// container after the cache closes. Its first 4 bytes name the process in a section, if any;
    /// bytes 8 to 40 record the index file's end (see ``ContainerLock/recordIndexEnd(_:identity:length:)``).
    static let lock = ".hoard-lock"
}

/// Coordinates the processes that open one container.
///
/// Several processes may share a container (an app and its extensions in an App Group, the workers
/// of one service). Whoever changes the container's files (writes an entry, evicts, removes, clears,
/// appends to the journal, writes a snapshot) first takes the *section lock*, a POSIX record lock
/// on byte 1 of the ``ContainerFile/lock`` file taken with `F_SETLKW` and released as soon as that
/// change is done: no lock is held while the cache is idle, so a suspended iOS app holds none (iOS
/// terminates a suspended app that holds a file lock in a shared container, exception `0xdead10cc`).
/// Threads of one process serialize on an in-process lock first: record locks do not exclude the
/// threads of the process that holds them.
///
/// A cache built with `exclusiveProcess(true)` also takes, for its whole life, an exclusive lock on
/// byte 0 without waiting: a process that already holds it, or opens the container later (whether
/// it asks for exclusivity or not), fails with ``CacheError/Code/containerInUse``. A process that
/// did not ask for it holds nothing while idle, so an exclusive opener cannot see it: exclusivity
/// only holds when every process on the container asks for it.
///
/// The locks are POSIX record locks (`fcntl`), not `flock`: a `flock` lock belongs to the open file,
/// so a child process that the app forks shares it until the child calls `exec`; a record lock
/// belongs to the process and is not inherited. Closing any descriptor of the file releases a
/// process's record locks, so a process opens the lock file once per folder (identified by device
/// and inode, whatever path names it) and counts its users: the stores of one process share it.
enum ContainerLock {
    /// A folder, by device and inode.
    struct Hold: Hashable, Sendable {
        let device: UInt64
        let inode: UInt64

        /// A folder by its `stat` numbers, whatever their types (`dev_t` is a signed 32-bit number
        /// on Apple platforms): their bit patterns, never a conversion that traps on a negative one.
        init(device: some BinaryInteger, inode: some BinaryInteger) {
            self.device = UInt64(truncatingIfNeeded: device)
            self.inode = UInt64(truncatingIfNeeded: inode)
        }
    }

    /// The byte of the lock file an exclusive process locks for its whole life.
    private static let lifetimeByte: off_t = 0
    /// The byte of the lock file whoever changes the container's files locks, briefly.
    private static let sectionByte: off_t = 1

    /// This process's opening of one container's lock file.
    private struct Holder {
        /// The lock file, or `nil` when it cannot be opened (a read-only folder without one).
        var descriptor: Int32?
        var users: Int
        /// How many of the users asked for the lifetime lock; it is held while this is above 0.
        var exclusiveUsers: Int
        /// Serializes this process's sections on the container.
        let section: Lock
    }

    private static let holders = Locked<[Hold: Holder]>([:])

    /// Joins this process's hold on the folder open as `folder`, opening its lock file if needed.
    ///
    /// - Parameters:
    ///   - folder: The folder's open descriptor.
    ///   - path: The folder's path, for messages.
    ///   - exclusive: Whether to take (or share) the lifetime lock that keeps other processes out.
    ///   - log: Receives a warning when the lock file cannot be opened or locked.
    /// - Returns: The hold to release; `nil` when the folder cannot be identified (a warning then
    ///   goes to `log`).
    /// - Throws: ``CacheError`` with code `containerInUse` when another process holds the lifetime
    ///   lock, or when `exclusive` and another process holds the lifetime lock.
    static func acquire(folder: Int32, path: String, exclusive: Bool, log: inout DeferredLog) throws -> Hold? {
        var status = stat()
        guard fstat(folder, &status) == 0 else {
            log.add(
                .warning,
                "Cannot lock the container \(path): \(CacheError.FileError(operation: "fstat", path: path, errorNumber: errno))."
            )
            return nil
        }
        let hold = Hold(device: status.st_dev, inode: status.st_ino)
        var warning: String?
        defer { if let warning { log.add(.warning, warning) } }
        return try holders.withLock { holders in
            var holder: Holder
            if let existing = holders[hold] {
                holder = existing
            } else {
                var file = openat(folder, ContainerFile.lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
                if file < 0 && (errno == EACCES || errno == EROFS || errno == EPERM) {
                    // A read-only container: an existing lock file can still be probed.
                    file = openat(folder, ContainerFile.lock, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
                }
                if file < 0 {
                    let failure = CacheError.FileError(
                        operation: "openat",
                        path: path + "/" + ContainerFile.lock,
                        errorNumber: errno
                    )
                    warning =
                        "Cannot open the lock file of the container \(path) "
                        + "(\(failure)); it is used without a lock, so another process "
                        + "changing it at the same time could undo this one's changes."
                }
                holder = Holder(descriptor: file >= 0 ? file : nil, users: 0, exclusiveUsers: 0, section: Lock())
            }
            if let file = holder.descriptor {
                if exclusive && holder.exclusiveUsers == 0 {
                    if let number = lock(file, byte: lifetimeByte, type: F_WRLCK) {
                        if holder.users == 0 { close(file) }
                        if number == EAGAIN || number == EACCES { throw CacheError.containerInUse(path: path) }
                        if number == EBADF {
                            warning = "Cannot lock the read-only container \(path) for this process alone."
                        } else {
                            warning = "Cannot lock the container \(path) (\(String(cString: strerror(number))))."
                        }
                    }
                } else if !exclusive && holder.exclusiveUsers == 0 && isLockedByAnotherProcess(file) {
                    if holder.users == 0 { close(file) }
                    throw CacheError.containerInUse(path: path)
                }
            }
            holder.users += 1
            if exclusive { holder.exclusiveUsers += 1 }
            holders[hold] = holder
            return hold
        }
    }

    /// Takes or releases (`F_UNLCK`) a record lock on one byte without waiting; returns `errno` on
    /// failure.
    private static func lock(_ file: Int32, byte: off_t, type: Int32, waits: Bool = false) -> Int32? {
        var request = flock()
        request.l_type = Int16(type)
        request.l_whence = Int16(SEEK_SET)
        request.l_start = byte
        request.l_len = 1
        while fcntl(file, waits ? F_SETLKW : F_SETLK, &request) != 0 {
            if errno != EINTR { return errno }
        }
        return nil
    }

    /// Whether another process holds the lifetime lock of the file.
    private static func isLockedByAnotherProcess(_ file: Int32) -> Bool {
        var request = flock()
        request.l_type = Int16(F_WRLCK)
        request.l_whence = Int16(SEEK_SET)
        request.l_start = lifetimeByte
        request.l_len = 1
        guard fcntl(file, F_GETLK, &request) == 0 else { return false }
        return request.l_type != Int16(F_UNLCK)
    }

    /// Lets go of a hold; the lock file is closed when the last store of the process lets go.
    static func release(_ hold: Hold, exclusive: Bool) {
        holders.withLock { holders in
            guard var holder = holders[hold] else { return }
            holder.users -= 1
            if exclusive { holder.exclusiveUsers -= 1 }
            if holder.users > 0 {
                if holder.exclusiveUsers == 0, exclusive, let file = holder.descriptor {
                    _ = lock(file, byte: lifetimeByte, type: F_UNLCK)
                }
                holders[hold] = holder
            } else {
                holders[hold] = nil
                if let file = holder.descriptor { close(file) }
            }
        }
    }

    /// Runs `body` holding the container's section lock: no other thread of this process and no
    /// other process changes the container's files meanwhile.
    ///
    /// `body` is told whether it may change the container's files. Without a hold, on a file system
    /// without record locks, or for a read-only lock file, it runs under the in-process lock only
    /// and may (a read-only container changes nothing anyway). It may not when another process holds
    /// a lock over the whole file, as releases before sections did for a cache's whole life: waiting
    /// would hang until that process closes its cache, so the section is refused instead (the race
    /// of such a process locking between the check and the wait remains), and when the lock fails
    /// for another reason. When it may, it also learns which process the lock file still named as in
    /// a section: one that died in the middle of its own. The caller holds no state lock; `body` must
    /// not call user code.
    static func withSection<Result>(_ hold: Hold?, _ body: (SectionAccess) throws -> Result) rethrows -> Result {
        guard let hold, let (section, file) = holders.withLock({ $0[hold].map { ($0.section, $0.descriptor) } })
        else { return try body(.granted()) }
        return try section.withLock {
            guard let file else { return try body(.granted()) }
            if let holder = wholeFileHolder(file) {
                return try body(
                    .refused("process \(holder) holds the whole container, as releases before shared containers did")
                )
            }
            let failure = lock(file, byte: sectionByte, type: F_WRLCK, waits: true)
            switch failure {
            case nil:
                // Every section ends by clearing the mark: one still there was cut short by a kill.
                let interrupted = markedWriter(file)
                mark(file, writer: getpid())
                defer {
                    mark(file, writer: 0)
                    _ = lock(file, byte: sectionByte, type: F_UNLCK)
                }
                return try body(.granted(interruptedWriter: interrupted))
            case EBADF?, ENOLCK?, EINVAL?, EOPNOTSUPP?:
                // A read-only lock file, or a file system without record locks.
                return try body(.granted())
            case let number?:
                let reason = "fcntl(F_SETLKW) failed: \(String(cString: strerror(number))) (errno \(number))"
                return try body(.refused("its lock cannot be taken (\(reason))"))
            }
        }
    }

    /// Whether a section may change the container's files, and why not.
    enum SectionAccess {
        /// The section may change the files; `interruptedWriter` is the process that died in the
        /// middle of the last section, if any (its temporary files may be left).
        case granted(interruptedWriter: Int32? = nil)
        case refused(String)
    }

    /// The process that holds a record lock over more than the section byte of the lock file (an
    /// earlier release's lifetime lock), if any.
    private static func wholeFileHolder(_ file: Int32) -> Int32? {
        var request = flock()
        request.l_type = Int16(F_WRLCK)
        request.l_whence = Int16(SEEK_SET)
        request.l_start = sectionByte
        request.l_len = 1
        guard fcntl(file, F_GETLK, &request) == 0, request.l_type != Int16(F_UNLCK) else { return nil }
        return request.l_start == sectionByte && request.l_len == 1 ? nil : request.l_pid
    }

    /// Records in the lock file's first 4 bytes which process is in a section (0 when none), so
    /// that an opener can tell a section was cut short by a kill.
    private static func mark(_ file: Int32, writer: Int32) {
        var value = writer.littleEndian
        _ = withUnsafeBytes(of: &value) { pwrite(file, $0.baseAddress, 4, 0) }
    }

    /// The process the lock file says is in a section, or `nil` when none is (or it cannot be read).
    ///
    /// Read without the section lock: a live process may be in a section now. A process that died
    /// in one stays named until the next section, so its temporary files are worth looking for.
    static func writerInSection(_ hold: Hold?) -> Int32? {
        guard let hold, let file = holders.withLock({ $0[hold]?.descriptor }) else { return nil }
        return markedWriter(file)
    }

    /// The process the lock file's first 4 bytes name, or `nil` when they name none.
    private static func markedWriter(_ file: Int32) -> Int32? {
        var value: Int32 = 0
        let count = withUnsafeMutableBytes(of: &value) { pread(file, $0.baseAddress, 4, 0) }
        let writer = Int32(littleEndian: value)
        return count == 4 && writer != 0 ? writer : nil
    }

    /// The offset in the lock file of the index file's recorded end: device u64 | inode u64 |
    /// length u64 | check u64 (the three xor'ed with a constant), little-endian.
    private static let indexEndOffset: off_t = 8
    private static let indexEndCheck: UInt64 = 0x486F_6172_6445_6E64

    /// Records, inside a section, how long the index file `identity` is once this section's
    /// records are in it, so that a reader can tell a file cut short (whose last whole records
    /// look like an end) from one that ends where its last writer left it.
    static func recordIndexEnd(_ hold: Hold?, identity: FileIdentity, length: Int) {
        guard let hold, let file = holders.withLock({ $0[hold]?.descriptor }) else { return }
        let numbers = [identity.device, identity.inode, UInt64(truncatingIfNeeded: length)]
        var bytes: [UInt8] = []
        for number in numbers + [numbers.reduce(indexEndCheck, ^)] { bytes.appendLittleEndian(number) }
        _ = bytes.withUnsafeBytes { pwrite(file, $0.baseAddress, $0.count, indexEndOffset) }
    }

    /// The index file's end as last recorded by ``recordIndexEnd(_:identity:length:)``, if any.
    static func recordedIndexEnd(_ hold: Hold?) -> (identity: FileIdentity, length: Int)? {
        guard let hold, let file = holders.withLock({ $0[hold]?.descriptor }) else { return nil }
        var bytes = [UInt8](repeating: 0, count: 32)
        let count = bytes.withUnsafeMutableBytes { pread(file, $0.baseAddress, 32, indexEndOffset) }
        guard count == 32 else { return nil }
        let numbers = bytes.withUnsafeBytes { buffer in
            (0..<4).map { buffer.loadLittleEndian(at: $0 * 8) as UInt64 }
        }
        guard numbers[0...2].reduce(indexEndCheck, ^) == numbers[3], let length = Int(exactly: numbers[2]) else {
            return nil
        }
        return (FileIdentity(device: numbers[0], inode: numbers[1]), length)
    }

    /// Whether this process holds the lifetime lock of the folder at `path`.
    static func isHeld(at path: String) -> Bool {
        var status = stat()
        guard stat(path, &status) == 0 else { return false }
        let hold = Hold(device: status.st_dev, inode: status.st_ino)
        return holders.withLock { ($0[hold]?.exclusiveUsers ?? 0) > 0 }
    }

    /// Whether this process has the folder at `path` open, exclusively or not.
    static func isOpen(at path: String) -> Bool {
        var status = stat()
        guard stat(path, &status) == 0 else { return false }
        let hold = Hold(device: status.st_dev, inode: status.st_ino)
        return holders.withLock { $0[hold] != nil }
    }
}
