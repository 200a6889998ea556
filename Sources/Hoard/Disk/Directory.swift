import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

#if canImport(Darwin)
private let systemRead = Darwin.read
#elseif canImport(Glibc)
private let systemRead = Glibc.read
#elseif canImport(Musl)
private let systemRead = Musl.read
#endif

/// An open folder and the POSIX calls the disk store makes inside it.
///
/// Every call is relative to the folder's descriptor (`openat`, `renameat`, `unlinkat`) with names
/// the store made itself, never a path built from a key. Files are opened with `O_NOFOLLOW`, so a
/// symbolic link planted in the container is not followed. Writes go to a temporary file created
/// with `O_EXCL` and are renamed into place without `fsync`: a crash can lose the last writes, never
/// tear one (readers see the old file or the new one, and a torn file fails its checksum).
final class Directory: Sendable {
    /// The folder's path, for messages.
    let path: String
    private let descriptor: Int32

    /// Creates a folder (mode 0700) and its parents if needed; returns its real path.
    ///
    /// The real path has every symbolic link resolved, so two spellings of one folder give one path.
    /// - Throws: ``CacheError`` with code `io` when the folder cannot be created.
    static func create(at url: URL) throws -> String {
        try createFolder(at: url)
        guard let resolved = realpath(url.path, nil) else {
            throw CacheError.io(
                "Cannot resolve the path of the container \(url.path).",
                underlying: POSIXFileError(operation: "realpath", path: url.path, errorNumber: errno)
            )
        }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Opens a folder, creating it (mode 0700) and its parents if needed.
    ///
    /// - Throws: ``CacheError`` with code `io` when the folder cannot be created or opened.
    init(creatingAt url: URL) throws {
        path = url.path
        try Self.createFolder(at: url)
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw CacheError.io(
                "Cannot open the container \(path).",
                underlying: POSIXFileError(operation: "open", path: path, errorNumber: errno)
            )
        }
        self.descriptor = descriptor
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
                underlying: POSIXFileError(operation: "mkdir", path: path, errorNumber: errno)
            )
        }
    }

    deinit {
        close(descriptor)
    }

    private func error(_ operation: String, _ name: String, _ number: Int32 = errno) -> POSIXFileError {
        POSIXFileError(operation: operation, path: path + "/" + name, errorNumber: number)
    }

    /// Reads a whole regular file; `nil` when it does not exist.
    ///
    /// - Throws: ``POSIXFileError`` for any other failure, including a name that is not a regular file.
    func read(_ name: String) throws(POSIXFileError) -> [UInt8]? {
        let file = openat(descriptor, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard file >= 0 else {
            if errno == ENOENT { return nil }
            throw error("open", name)
        }
        defer { close(file) }
        var status = stat()
        guard fstat(file, &status) == 0 else { throw error("fstat", name) }
        guard status.st_mode & S_IFMT == S_IFREG else { throw error("read", name, EISDIR) }
        let size = Int(status.st_size)
        var failure: Int32 = 0
        let bytes = [UInt8](unsafeUninitializedCapacity: size) { buffer, initialized in
            var done = 0
            while done < size {
                let result = systemRead(file, buffer.baseAddress! + done, size - done)
                if result > 0 {
                    done += result
                } else if result == 0 {
                    break
                } else if errno != EINTR {
                    failure = errno
                    break
                }
            }
            initialized = done
        }
        if failure != 0 { throw error("read", name, failure) }
        return bytes
    }

    /// Writes `bytes` to `name` through the temporary file `temporaryName`, then renames it into place.
    ///
    /// - Throws: ``POSIXFileError``; the temporary file is removed on failure.
    func writeAtomically(_ bytes: [UInt8], to name: String, through temporaryName: String) throws(POSIXFileError) {
        let file = openat(descriptor, temporaryName, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard file >= 0 else { throw error("open", temporaryName) }
        var failure: POSIXFileError?
        bytes.withUnsafeBytes { buffer in
            var done = 0
            while done < buffer.count {
                let result = write(file, buffer.baseAddress! + done, buffer.count - done)
                if result >= 0 {
                    done += result
                } else if errno != EINTR {
                    failure = error("write", temporaryName)
                    return
                }
            }
        }
        if close(file) != 0 && failure == nil { failure = error("close", temporaryName) }
        if failure == nil && renameat(descriptor, temporaryName, descriptor, name) != 0 {
            failure = error("rename", name)
        }
        if let failure {
            unlinkat(descriptor, temporaryName, 0)
            throw failure
        }
    }

    /// Removes a file, a symbolic link (not its target) or a folder and what it holds; a missing name
    /// is not an error.
    ///
    /// A folder's contents are removed through descriptors opened with `O_NOFOLLOW`: a link inside it
    /// is removed, never followed.
    /// - Throws: ``POSIXFileError`` for any other failure.
    func remove(_ name: String) throws(POSIXFileError) {
        try remove(name, in: descriptor, path: name, depth: 0)
    }

    /// How deep ``remove(_:)`` goes into nested folders before giving up.
    private static let maximumRemovalDepth = 32

    private func remove(_ name: String, in parent: Int32, path: String, depth: Int) throws(POSIXFileError) {
        guard unlinkat(parent, name, 0) != 0 else { return }
        switch errno {
        case ENOENT: return
        case EISDIR, EPERM:
            // Linux says EISDIR for a folder, macOS EPERM.
            if unlinkat(parent, name, AT_REMOVEDIR) == 0 || errno == ENOENT { return }
            guard errno == ENOTEMPTY || errno == EEXIST, depth < Self.maximumRemovalDepth else {
                throw error("rmdir", path)
            }
            let folder = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard folder >= 0 else { throw error("open", path) }
            defer { close(folder) }
            for child in try names(in: folder, path: path) {
                try remove(child, in: folder, path: path + "/" + child, depth: depth + 1)
            }
            if unlinkat(parent, name, AT_REMOVEDIR) != 0 && errno != ENOENT { throw error("rmdir", path) }
        default: throw error("unlink", path)
        }
    }

    /// The names in an open folder, `.` and `..` left out.
    private func names(in folder: Int32, path: String) throws(POSIXFileError) -> [String] {
        let copy = dup(folder)
        guard copy >= 0, let stream = fdopendir(copy) else {
            if copy >= 0 { close(copy) }
            throw error("opendir", path)
        }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// The names in the folder with their modification times and sizes (of the name itself, a link
    /// not followed), `.` and `..` left out.
    ///
    /// - Throws: ``POSIXFileError`` when the folder cannot be read.
    func list() throws(POSIXFileError) -> [(name: String, modified: Double, size: Int)] {
        let copy = dup(descriptor)
        guard copy >= 0, let stream = fdopendir(copy) else {
            if copy >= 0 { close(copy) }
            throw error("opendir", ".")
        }
        defer { closedir(stream) }
        rewinddir(stream)
        var names: [(name: String, modified: Double, size: Int)] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name == "." || name == ".." { continue }
            var status = stat()
            let modified: Double
            let size: Int
            if fstatat(descriptor, name, &status, AT_SYMLINK_NOFOLLOW) == 0 {
                #if canImport(Darwin)
                let time = status.st_mtimespec
                #else
                let time = status.st_mtim
                #endif
                modified = Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
                size = Int(status.st_size)
            } else {
                modified = 0
                size = 0
            }
            names.append((name, modified, size))
        }
        return names
    }
}
