import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A file's identity: the device and inode that `fstat` reports.
struct FileIdentity: Hashable, Sendable {
    let device: UInt64
    let inode: UInt64

    init(_ status: stat) {
        device = UInt64(truncatingIfNeeded: status.st_dev)
        inode = UInt64(truncatingIfNeeded: status.st_ino)
    }

    init(device: UInt64, inode: UInt64) {
        self.device = device
        self.inode = inode
    }
}

extension Directory {
    /// Opens `name` inside the folder, never following a symbolic link.
    ///
    /// - Returns: The descriptor, which the caller closes; `nil` when nothing has the name.
    /// - Throws: ``CacheError/FileError`` for any other failure, including a name that is not a regular file.
    func open(_ name: String, flags: Int32) throws(CacheError.FileError) -> Int32? {
        let folder = self.folder
        let file = openat(folder.descriptor, name, flags | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard file >= 0 else {
            if errno == ENOENT { return nil }
            throw error("openat", name)
        }
        var status = stat()
        guard fstat(file, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            close(file)
            throw error("openat", name, EISDIR)
        }
        return file
    }

    /// The identity of what has the name `name` in the folder (a link not followed).
    ///
    /// - Returns: `.success(nil)` when nothing has the name, `.failure` when the folder cannot be
    ///   searched (its permissions, too many open files): then nothing is known.
    func identity(of name: String) -> Result<FileIdentity?, CacheError.FileError> {
        let folder = self.folder
        var status = stat()
        guard fstatat(folder.descriptor, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else {
            return errno == ENOENT || errno == ENOTDIR ? .success(nil) : .failure(error("fstatat", name))
        }
        return .success(FileIdentity(status))
    }

    /// The size of the regular file `name` (a link not followed); `nil` when there is none.
    func size(of name: String) -> Int? {
        let folder = self.folder
        var status = stat()
        guard fstatat(folder.descriptor, name, &status, AT_SYMLINK_NOFOLLOW) == 0, status.st_mode & S_IFMT == S_IFREG
        else { return nil }
        return Int(exactly: status.st_size)
    }

    /// The temporary files in the folder (names that start with ``ContainerFile/temporaryPrefix``),
    /// with their modification times.
    ///
    /// Other names are skipped without being copied out of the listing: a large container costs one
    /// `readdir` pass and no `stat` per entry.
    /// - Throws: ``CacheError/FileError`` when the folder cannot be read.
    func temporaryFiles() throws(CacheError.FileError) -> [(name: String, modified: Double)] {
        let folder = self.folder
        let prefix = Array(ContainerFile.temporaryPrefix.utf8).map { CChar(bitPattern: $0) }
        var found: [(name: String, modified: Double)] = []
        try withExtendedLifetime(folder) { () throws(CacheError.FileError) in
            try forEachName(in: folder.descriptor, path: ".") { bytes in
                // A name shorter than the prefix differs at its NUL at the latest.
                for index in prefix.indices where bytes[index] != prefix[index] { return }
                let name = String(cString: bytes)
                var status = stat()
                guard fstatat(folder.descriptor, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else { return }
                found.append((name, Platform.modificationTime(of: status)))
            }
        }
        return found
    }

    /// The temporary files among `names` (names a listing of the folder found; those that do not
    /// start with ``ContainerFile/temporaryPrefix`` are skipped), with their modification times, as
    /// ``temporaryFiles()`` finds them without listing the folder; a name gone since is left out.
    ///
    /// - Complexity: One `stat` per temporary file.
    func temporaryFiles(named names: [String]) -> [(name: String, modified: Double)] {
        let folder = self.folder
        return withExtendedLifetime(folder) {
            names.compactMap { name in
                var status = stat()
                // Bytes, as the listing compares them: not characters.
                guard name.utf8.starts(with: ContainerFile.temporaryPrefix.utf8),
                    fstatat(folder.descriptor, name, &status, AT_SYMLINK_NOFOLLOW) == 0
                else { return nil }
                return (name, Platform.modificationTime(of: status))
            }
        }
    }
}

extension Directory {
    /// Creates `name`, which must not exist, and writes `bytes` to it; removes it again on failure.
    ///
    /// For a file nobody reads before it is complete (the index, written under the section lock):
    /// no temporary file is left behind by a kill, at worst a short file that fails its checksum. A
    /// deleted folder is created again first, as for ``writeAtomically(_:to:through:)``.
    /// - Throws: ``CacheError/FileError``, with `EEXIST` when the name is taken.
    func writeNew(_ bytes: [UInt8], to name: String) throws(CacheError.FileError) {
        var folder = self.folder
        let flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC
        var file = openat(folder.descriptor, name, flags, 0o600)
        if file < 0 && errno == ENOENT, let reopened = try reopenIfDeleted(folder) {
            // The folder was deleted: it is created again first, as for every write.
            folder = reopened
            file = openat(folder.descriptor, name, flags, 0o600)
        }
        guard file >= 0 else { throw error("openat", name) }
        let written = RawIO.append(bytes, to: file)
        let failure = written ? nil : error("write", name)
        if close(file) != 0 || failure != nil {
            unlinkat(folder.descriptor, name, 0)
            throw failure ?? error("close", name)
        }
    }
}

/// Reads and writes through a raw descriptor, retrying interrupted calls.
enum RawIO {
    /// Reads up to `count` bytes of `file` from `offset`; fewer at its end.
    static func read(_ file: Int32, count: Int, at offset: Int) -> [UInt8]? {
        guard count > 0 else { return [] }
        var failed = false
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            let (done, failure) = fill(UnsafeMutableRawBufferPointer(buffer)) { destination, length, done in
                pread(file, destination, length, off_t(offset + done))
            }
            failed = failure != 0
            initialized = done
        }
        return failed ? nil : bytes
    }

    /// Reads into `buffer` until it is full or the file ends, calling `read` again after an
    /// interrupted call (`EINTR`).
    ///
    /// - Parameters:
    ///   - buffer: Where the bytes go.
    ///   - read: One call of `read(2)` or `pread(2)`: into `destination`, at most `length` bytes, when
    ///     `done` bytes were read before (for `pread`'s offset); returns what the call returns.
    /// - Returns: How many bytes were read, and the `errno` of the call that failed (0 when none did).
    @inline(__always)
    static func fill(
        _ buffer: UnsafeMutableRawBufferPointer,
        by read: (_ destination: UnsafeMutableRawPointer, _ length: Int, _ done: Int) -> Int
    ) -> (count: Int, errorNumber: Int32) {
        var done = 0
        while done < buffer.count {
            let result = read(buffer.baseAddress! + done, buffer.count - done, done)
            if result > 0 {
                done += result
            } else if result == 0 {
                break
            } else if errno != EINTR {
                return (done, errno)
            }
        }
        return (done, 0)
    }

    /// Reads the bytes of `file` from `offset` to its end.
    static func readToEnd(_ file: Int32, from offset: Int) -> [UInt8]? {
        var status = stat()
        guard fstat(file, &status) == 0, let size = Int(exactly: status.st_size) else { return nil }
        guard size > offset else { return [] }
        return read(file, count: size - offset, at: offset)
    }

    /// Writes all of `bytes` to `file` (at its end when it was opened with `O_APPEND`), retrying
    /// interrupted calls; returns whether it did.
    static func append(_ bytes: [UInt8], to file: Int32) -> Bool {
        bytes.withUnsafeBytes { buffer in
            var done = 0
            while done < buffer.count {
                let result = write(file, buffer.baseAddress! + done, buffer.count - done)
                if result >= 0 {
                    done += result
                } else if errno != EINTR {
                    return false
                }
            }
            return true
        }
    }
}
