import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension ContainerFile {
    /// The file whose advisory lock (`fcntl(F_SETLK)`) marks a container as open in some process.
    ///
    /// Never an entry (not 64 hex digits) and never swept as a temporary file; it stays in the
    /// container, empty, after the cache closes.
    static let lock = ".hoard-lock"
}

/// Keeps two processes from opening one container at the same time.
///
/// A disk store keeps its eviction order in memory and saves it over the container's index; two
/// processes writing one container would undo each other's index and evictions, and a count limit
/// would no longer hold. So the first process to open a container takes an exclusive, non-blocking
/// lock on its ``ContainerFile/lock`` file and keeps it while any of its stores has the folder open;
/// another process then fails to open it with ``CacheError/Code/containerInUse``. The kernel releases
/// the lock when the process exits, however it ends (a crash or `SIGKILL` included).
///
/// The lock is a POSIX record lock (`fcntl(F_SETLK)`), not `flock`: a `flock` lock belongs to the open
/// file, so a child process that the app forks shares it until the child calls `exec` (or for good
/// if it never does), and the app could not open its own container again meanwhile; a record lock
/// belongs to the process and is not inherited. Closing any descriptor of the file releases a record
/// lock, so a process opens the lock file once per folder (identified by device and inode, whatever
/// path names it) and counts its users: the stores of one process share the hold.
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

    private struct Holder {
        var descriptor: Int32
        var users: Int
    }

    private static let holders = Locked<[Hold: Holder]>([:])

    /// Takes the lock of the folder open as `folder`, or joins this process's hold on it.
    ///
    /// - Returns: The hold to release, or `nil` when the folder cannot be locked (a read-only folder
    ///   that has no lock file yet, a file system without locks); a warning then goes to `log`.
    /// - Throws: ``CacheError`` with code `containerInUse` when another process holds the lock.
    static func acquire(folder: Int32, path: String, log: inout DeferredLog) throws -> Hold? {
        var status = stat()
        guard fstat(folder, &status) == 0 else {
            log.add(.warning, "Cannot lock the container \(path): fstat failed (errno \(errno)).")
            return nil
        }
        let hold = Hold(device: status.st_dev, inode: status.st_ino)
        var warning: String?
        defer { if let warning { log.add(.warning, warning) } }
        return try holders.withLock { holders in
            if holders[hold] != nil {
                holders[hold]?.users += 1
                return hold
            }
            var file = openat(folder, ContainerFile.lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
            var isWritable = true
            if file < 0 && (errno == EACCES || errno == EROFS || errno == EPERM) {
                // A read-only container: an existing lock file can still take a shared lock, which
                // keeps out a process that would write.
                file = openat(folder, ContainerFile.lock, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
                isWritable = false
            }
            guard file >= 0 else {
                warning =
                    "Cannot open the lock file of the container \(path) "
                    + "(\(String(cString: strerror(errno)))); it is used without a lock, so another process "
                    + "opening it at the same time could undo this one's changes."
                return nil
            }
            while !lockWholeFile(file, exclusive: isWritable) {
                let number = errno
                if number == EINTR { continue }
                close(file)
                if number == EAGAIN || number == EACCES {
                    throw CacheError.containerInUse(path: path)
                }
                warning =
                    "Cannot lock the container \(path) (\(String(cString: strerror(number)))); it is used "
                    + "without a lock, so another process opening it at the same time could undo this one's changes."
                return nil
            }
            holders[hold] = Holder(descriptor: file, users: 1)
            return hold
        }
    }

    /// Takes a POSIX record lock on the whole file without waiting; `false` with `errno` set when
    /// another process holds a conflicting one.
    private static func lockWholeFile(_ file: Int32, exclusive: Bool) -> Bool {
        var request = flock()
        request.l_type = Int16(exclusive ? F_WRLCK : F_RDLCK)
        request.l_whence = Int16(SEEK_SET)
        request.l_start = 0
        request.l_len = 0
        return fcntl(file, F_SETLK, &request) == 0
    }

    /// Lets go of a hold; the lock is released when the last store of the process lets go.
    static func release(_ hold: Hold) {
        holders.withLock { holders in
            guard var holder = holders[hold] else { return }
            holder.users -= 1
            if holder.users > 0 {
                holders[hold] = holder
            } else {
                holders[hold] = nil
                close(holder.descriptor)
            }
        }
    }

    /// Whether this process holds the lock of the folder at `path`.
    static func isHeld(at path: String) -> Bool {
        var status = stat()
        guard stat(path, &status) == 0 else { return false }
        let hold = Hold(device: status.st_dev, inode: status.st_ino)
        return holders.withLock { $0[hold] != nil }
    }
}
