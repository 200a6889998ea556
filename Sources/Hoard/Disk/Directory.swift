import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An open folder and the POSIX calls the disk store makes inside it.
///
/// Every call is relative to the folder's descriptor (`openat`, `renameat`, `unlinkat`) with names
/// the store made itself, never a path built from a key. Files are opened with `O_NOFOLLOW`, so a
/// symbolic link planted in the container is not followed. Writes go to a temporary file created
/// with `O_EXCL` and are renamed into place without `fsync`: a crash can lose the last writes, never
/// tear one (readers see the old file or the new one, and a torn file fails its checksum).
///
/// Opening a folder joins its container lock (see ``ContainerLock``): changes to its files run in
/// ``withSection(_:)``, so that two processes never change one container at once. When the folder
/// is deleted while it is open, the next write creates it again at the same path, if its parent
/// folder still exists, and joins the lock there: deleting a cache's folder clears it, it does not
/// break it for the rest of the process.
final class Directory: Sendable {
    /// The folder's path, for messages.
    let path: String
    /// The current opening of the folder; replaced when the folder was deleted and is created again.
    ///
    /// Each call keeps the opening it started with alive until it returns, so a descriptor is never
    /// closed (and its number reused) while another thread still uses it.
    private let current: Locked<OpenFolder>
    /// Whether this process keeps other processes out of the folder while it is open.
    let isExclusive: Bool

    /// Creates a folder (mode 0700) and its parents if needed; returns its real path.
    ///
    /// The real path has every symbolic link resolved, so two spellings of one folder give one path.
    /// - Throws: ``CacheError`` with code `io` when the folder cannot be created.
    static func create(at url: URL) throws -> String {
        try createFolder(at: url)
        guard let resolved = realpath(url.path, nil) else {
            throw CacheError.io(
                "Cannot resolve the path of the container \(url.path).",
                underlying: CacheError.FileError(operation: "realpath", path: url.path, errorNumber: errno)
            )
        }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Opens a folder, creating it (mode 0700) and its parents if needed, and joins its container lock.
    ///
    /// - Parameters:
    ///   - url: The folder.
    ///   - exclusive: Whether this process keeps every other process out while the folder is open.
    ///   - log: Receives a warning when the container cannot be locked (a read-only folder without a
    ///     lock file, a file system without locks); the folder is opened all the same.
    /// - Throws: ``CacheError`` with code `containerInUse` when another process holds the container
    ///   exclusively (or, with `exclusive`, holds it at all), or with code `io` when the folder cannot
    ///   be created or opened.
    init(creatingAt url: URL, exclusive: Bool = false, log: inout DeferredLog) throws {
        path = url.path
        isExclusive = exclusive
        try Self.createFolder(at: url)
        current = Locked(try OpenFolder(path: path, exclusive: exclusive, log: &log))
    }

    /// Records how long the index file is after a section's appends (see
    /// ``ContainerLock/recordIndexEnd(_:identity:length:)``); called inside a section.
    func recordIndexEnd(identity: FileIdentity, length: Int) {
        let folder = self.folder
        withExtendedLifetime(folder) { ContainerLock.recordIndexEnd(folder.lock, identity: identity, length: length) }
    }

    /// The index file's end as last recorded, if any; read inside a section.
    var recordedIndexEnd: (identity: FileIdentity, length: Int)? {
        let folder = self.folder
        return withExtendedLifetime(folder) { ContainerLock.recordedIndexEnd(folder.lock) }
    }

    /// The process the container's lock file names as in a section, if any (see ``ContainerLock``).
    var writerInSection: Int32? { ContainerLock.writerInSection(folder.lock) }

    /// Runs `body` holding the container's section lock (see ``ContainerLock``): no other process,
    /// and no other thread of this one, changes the container's files meanwhile.
    ///
    /// `body` learns whether it may change them (see ``ContainerLock/withSection(_:_:)``).
    func withSection<Result>(_ body: (ContainerLock.SectionAccess) throws -> Result) rethrows -> Result {
        let folder = self.folder
        return try withExtendedLifetime(folder) { try ContainerLock.withSection(folder.lock, body) }
    }

    private static func createFolder(at url: URL) throws {
        let path = url.path
        do {
            let parent = url.deletingLastPathComponent()
            try FileManager.default.createDirectory(at: parent, withIntermediateDirectories: true)
        } catch {
            throw CacheError.io("Cannot create the folder \(url.deletingLastPathComponent().path).", underlying: error)
        }
        if mkdir(path, 0o700) != 0 && errno != EEXIST {
            throw CacheError.io(
                "Cannot create the container \(path).",
                underlying: CacheError.FileError(operation: "mkdir", path: path, errorNumber: errno)
            )
        }
    }

    /// The folder's current descriptor, kept open until the returned opening is released.
    var folder: OpenFolder { current.withLock { $0 } }

    /// Opens the folder again at ``path`` if `stale` is the current opening and its folder was
    /// deleted; returns the opening to retry with, or `nil` when the folder was not deleted.
    func reopenIfDeleted(_ stale: OpenFolder) throws(CacheError.FileError) -> OpenFolder? {
        guard isDeleted(stale) else { return nil }
        let result = current.withLock { current -> Result<OpenFolder, CacheError.FileError> in
            // Another call may have opened it again already.
            guard current === stale else { return .success(current) }
            // Only the container itself is made again: when its parent is gone too, the whole
            // tree was removed on purpose (an app's data folder, a test's temporary folder).
            if mkdir(path, 0o700) != 0 && errno != EEXIST {
                return .failure(CacheError.FileError(operation: "mkdir", path: path, errorNumber: errno))
            }
            do {
                var ignored = DeferredLog()
                current = try OpenFolder(path: path, exclusive: isExclusive, log: &ignored)
                return .success(current)
            } catch let error as CacheError {
                let number = error.code == .containerInUse ? EAGAIN : EACCES
                let underlying = (error.underlyingError as? CacheError.FileError)?.errorNumber ?? number
                return .failure(CacheError.FileError(operation: "reopen", path: path, errorNumber: underlying))
            } catch {
                return .failure(CacheError.FileError(operation: "reopen", path: path, errorNumber: EACCES))
            }
        }
        return try result.get()
    }

    /// Whether the folder this opens is no longer the one at ``path`` (see `isDeleted(_:)`).
    var isOpenFolderGone: Bool { isDeleted(folder) }

    /// Whether the folder open as `opening` is no longer the one at ``path``: its path is gone
    /// (`ENOENT`), or names another folder (device or inode differ).
    ///
    /// Compares identities rather than reading the open folder's link count: APFS reports a folder's
    /// entry count there, never 0, even once the folder is deleted.
    private func isDeleted(_ opening: OpenFolder) -> Bool {
        var open = stat()
        guard fstat(opening.descriptor, &open) == 0 else { return false }
        var named = stat()
        guard stat(path, &named) == 0 else { return errno == ENOENT }
        return ContainerLock.Hold(device: open.st_dev, inode: open.st_ino)
            != ContainerLock.Hold(device: named.st_dev, inode: named.st_ino)
    }

    func error(_ operation: String, _ name: String, _ number: Int32 = errno) -> CacheError.FileError {
        CacheError.FileError(operation: operation, path: path + "/" + name, errorNumber: number)
    }

    /// Reads a whole regular file; `nil` when it does not exist.
    ///
    /// - Throws: ``CacheError/FileError`` for any other failure, including a name that is not a regular file.
    func read(_ name: String) throws(CacheError.FileError) -> [UInt8]? { try readWithTime(name)?.bytes }

    /// Reads a whole regular file, with its modification time; `nil` when it does not exist.
    ///
    /// - Throws: ``CacheError/FileError`` for any other failure, including a name that is not a regular file.
    func readWithTime(_ name: String) throws(CacheError.FileError) -> (bytes: [UInt8], modified: Double)? {
        let folder = self.folder
        let file = openat(folder.descriptor, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard file >= 0 else {
            if errno == ENOENT { return nil }
            throw error("openat", name)
        }
        defer { close(file) }
        var status = stat()
        guard fstat(file, &status) == 0 else { throw error("fstat", name) }
        guard status.st_mode & S_IFMT == S_IFREG else { throw error("read", name, EISDIR) }
        // A file larger than this platform's Int (2 GiB on a 32-bit one) cannot be an entry here.
        guard let size = Int(exactly: status.st_size) else { throw error("read", name, EFBIG) }
        // An empty file is the empty array: `Array(unsafeUninitializedCapacity: 0)` stores its count
        // into the shared empty-array singleton, a race ThreadSanitizer reports when two threads read
        // empty files at once.
        if size == 0 { return ([], Platform.modificationTime(of: status)) }
        var failure: Int32 = 0
        let bytes = [UInt8](unsafeUninitializedCapacity: size) { buffer, initialized in
            let (done, number) = RawIO.fill(UnsafeMutableRawBufferPointer(buffer)) { destination, length, _ in
                Platform.read(file, destination, length)
            }
            failure = number
            initialized = done
        }
        if failure != 0 { throw error("read", name, failure) }
        return (bytes, Platform.modificationTime(of: status))
    }

    /// Writes `bytes` to `name` through the temporary file `temporaryName`, then renames it into place.
    ///
    /// When the folder was deleted, it is created again first (see ``Directory``).
    ///
    /// - Throws: ``CacheError/FileError``; the temporary file is removed on failure.
    func writeAtomically(_ bytes: [UInt8], to name: String, through temporaryName: String) throws(CacheError.FileError)
    {
        var folder = self.folder
        let flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC
        var file = openat(folder.descriptor, temporaryName, flags, 0o600)
        if file < 0 && errno == ENOENT, let reopened = try reopenIfDeleted(folder) {
            folder = reopened
            file = openat(folder.descriptor, temporaryName, flags, 0o600)
        }
        guard file >= 0 else { throw error("openat", temporaryName) }
        var failure = RawIO.append(bytes, to: file) ? nil : error("write", temporaryName)
        if close(file) != 0 && failure == nil { failure = error("close", temporaryName) }
        if failure == nil && renameat(folder.descriptor, temporaryName, folder.descriptor, name) != 0 {
            failure = error("rename", name)
        }
        if let failure {
            unlinkat(folder.descriptor, temporaryName, 0)
            throw failure
        }
    }

    /// Removes a file, a symbolic link (not its target) or a folder and what it holds; a missing name
    /// is not an error.
    ///
    /// A folder's contents are removed through descriptors opened with `O_NOFOLLOW`: a link inside it
    /// is removed, never followed.
    /// - Throws: ``CacheError/FileError`` for any other failure.
    func remove(_ name: String) throws(CacheError.FileError) {
        let folder = self.folder
        defer { withExtendedLifetime(folder) {} }
        try remove(name, in: folder.descriptor, path: name, depth: 0)
    }

    /// How deep ``remove(_:)`` goes into nested folders before giving up.
    private static let maximumRemovalDepth = 32

    private func remove(_ name: String, in parent: Int32, path: String, depth: Int) throws(CacheError.FileError) {
        guard unlinkat(parent, name, 0) != 0 else { return }
        switch errno {
        case ENOENT: return
        case EISDIR, EPERM:
            // Linux says EISDIR for a folder, macOS EPERM.
            if unlinkat(parent, name, AT_REMOVEDIR) == 0 || errno == ENOENT { return }
            guard errno == ENOTEMPTY || errno == EEXIST, depth < Self.maximumRemovalDepth else {
                throw error("rmdir", path)
            }
            let child = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard child >= 0 else { throw error("openat", path) }
            defer { close(child) }
            for grandchild in try names(in: child, path: path) {
                try remove(grandchild, in: child, path: path + "/" + grandchild, depth: depth + 1)
            }
            if unlinkat(parent, name, AT_REMOVEDIR) != 0 && errno != ENOENT { throw error("rmdir", path) }
        default: throw error("unlink", path)
        }
    }

    /// Calls `body` with every name in an open folder, `.` and `..` included: the one `readdir`
    /// loop.
    ///
    /// Each name is read in place, up to its NUL, and is valid only during its call: a record is only
    /// as long as its name (`d_reclen`), so copying the whole `d_name` array would read past the last
    /// record of glibc's buffer. Reads through a duplicate of `descriptor`, which shares its read
    /// position: the stream is rewound first, so that an earlier listing of the same descriptor does
    /// not hide any name.
    func forEachName(
        in descriptor: Int32,
        path: String,
        _ body: (UnsafePointer<CChar>) -> Void
    ) throws(CacheError.FileError) {
        let copy = dup(descriptor)
        guard copy >= 0, let stream = fdopendir(copy) else {
            if copy >= 0 { close(copy) }
            throw error("opendir", path)
        }
        defer { closedir(stream) }
        rewinddir(stream)
        let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name) ?? 0
        while let entry = readdir(stream) {
            body(UnsafeRawPointer(entry).advanced(by: nameOffset).assumingMemoryBound(to: CChar.self))
        }
    }

    /// The names in an open folder, `.` and `..` left out.
    private func names(in descriptor: Int32, path: String) throws(CacheError.FileError) -> [String] {
        var names: [String] = []
        try forEachName(in: descriptor, path: path) { bytes in
            let name = String(cString: bytes)
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// The names in the folder, `.` and `..` left out.
    ///
    /// - Throws: ``CacheError/FileError`` when the folder cannot be read.
    /// - Complexity: One `readdir` pass; no `stat`.
    func names() throws(CacheError.FileError) -> [String] {
        let folder = self.folder
        return try withExtendedLifetime(folder) { () throws(CacheError.FileError) in
            try names(in: folder.descriptor, path: ".")
        }
    }

    /// The names in the folder with their modification times and sizes (of the name itself, a link
    /// not followed), `.` and `..` left out.
    ///
    /// - Throws: ``CacheError/FileError`` when the folder cannot be read.
    /// - Complexity: One `readdir` pass and one `fstatat` per name, on every core.
    func list() throws(CacheError.FileError) -> [(name: String, modified: Double, size: Int)] {
        let folder = self.folder
        return try names(in: folder.descriptor, path: ".").concurrentMap { name in
            var status = stat()
            guard fstatat(folder.descriptor, name, &status, AT_SYMLINK_NOFOLLOW) == 0 else { return (name, 0, 0) }
            return (name, Platform.modificationTime(of: status), Int(clamping: status.st_size))
        }
    }
}

/// One opening of a container folder: its descriptor and this process's hold on its lock.
///
/// Closing the descriptor and releasing the hold happen when the last user lets go of the opening.
final class OpenFolder: Sendable {
    let descriptor: Int32
    let lock: ContainerLock.Hold?
    private let isExclusive: Bool

    /// Opens the folder at `path` and joins its container lock.
    ///
    /// - Throws: ``CacheError`` with code `containerInUse` or `io`.
    init(path: String, exclusive: Bool, log: inout DeferredLog) throws {
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw CacheError.io(
                "Cannot open the container \(path).",
                underlying: CacheError.FileError(operation: "open", path: path, errorNumber: errno)
            )
        }
        do {
            lock = try ContainerLock.acquire(folder: descriptor, path: path, exclusive: exclusive, log: &log)
        } catch {
            close(descriptor)
            throw error
        }
        self.descriptor = descriptor
        isExclusive = exclusive
    }

    deinit {
        if let lock { ContainerLock.release(lock, exclusive: isExclusive) }
        close(descriptor)
    }
}
