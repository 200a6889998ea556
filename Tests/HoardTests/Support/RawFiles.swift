import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

#if canImport(Glibc)
private let systemWrite = Glibc.write
#elseif canImport(Darwin)
private let systemWrite = Darwin.write
#elseif canImport(Musl)
private let systemWrite = Musl.write
#endif

/// Plain POSIX file helpers for tests that plant files by the hundred: Foundation's `Data.write`
/// calls `fsync` on Linux, which makes such tests slow.
enum RawFiles {
    /// An error from a POSIX call made by a helper.
    struct Failure: Error, CustomStringConvertible {
        let operation: String
        let path: String
        let errorNumber: Int32
        var description: String { "\(operation) \(path): \(String(cString: strerror(errorNumber)))" }
    }

    /// Creates or truncates the regular file at `path` (mode 0600) and writes `bytes` to it.
    static func write(_ bytes: [UInt8], to path: String) throws {
        let file = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard file >= 0 else { throw Failure(operation: "open", path: path, errorNumber: errno) }
        defer { close(file) }
        var done = 0
        while done < bytes.count {
            let result = bytes.withUnsafeBytes { systemWrite(file, $0.baseAddress! + done, bytes.count - done) }
            guard result >= 0 else { throw Failure(operation: "write", path: path, errorNumber: errno) }
            done += result
        }
    }

    /// Reads the whole file at `path`, following symbolic links.
    static func read(_ path: String) throws -> [UInt8] {
        try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// Whether anything (a file, a folder, a link, even a dangling one) has that path.
    static func exists(_ path: String) -> Bool {
        var status = stat()
        return lstat(path, &status) == 0
    }

    /// The kind of what is at `path` (`S_IFREG`, `S_IFDIR`, `S_IFLNK`…), without following a link;
    /// `nil` when nothing is there.
    static func kind(_ path: String) -> mode_t? {
        var status = stat()
        guard lstat(path, &status) == 0 else { return nil }
        return status.st_mode & S_IFMT
    }

    /// The permission bits of what is at `path`, without following a link.
    static func permissions(_ path: String) -> mode_t? {
        var status = stat()
        guard lstat(path, &status) == 0 else { return nil }
        return status.st_mode & 0o7777
    }
}
