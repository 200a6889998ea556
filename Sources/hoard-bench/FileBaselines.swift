import Foundation
import HoardTestSupport

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// The file-system baselines of the disk scenarios: the plain POSIX calls a disk cache cannot avoid,
// and the Foundation one-liners an app would write without a cache library.

/// A failure of the benchmark itself (not a measurement).
struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// An open folder, for the `…at` calls (the way Hoard's disk store addresses its container).
final class OpenFolder {
    let url: URL
    let descriptor: Int32

    init(_ url: URL) throws {
        self.url = url
        descriptor = open(url.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { throw BenchError("cannot open \(url.path): errno \(errno)") }
    }

    deinit { close(descriptor) }
}

/// File names shaped like Hoard's entry names: 64 lowercase hex digits.
func entryLikeNames(_ count: Int) -> [String] {
    (0..<count).map { index in
        var generator = SplitMix64(seed: UInt64(index))
        return (0..<4).map { _ in
            let hex = String(generator.next(), radix: 16)
            return String(repeating: "0", count: 16 - hex.count) + hex
        }.joined()
    }
}

enum PosixFiles {
    /// Writes every file the way an atomic-replace store does, at the least.
    ///
    /// For every name: `openat(temporary, O_CREAT | O_EXCL)`, `write`, `close`,
    /// `renameat(temporary, name)`; no `fsync`.
    static func write(_ payload: [UInt8], names: [String], temporaryNames: [String], in folder: OpenFolder) throws {
        try payload.withUnsafeBytes { bytes in
            for (name, temporary) in zip(names, temporaryNames) {
                let file = openat(folder.descriptor, temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
                guard file >= 0 else { throw BenchError("openat \(temporary): errno \(errno)") }
                var done = 0
                while done < bytes.count {
                    let result = Foundation.write(file, bytes.baseAddress! + done, bytes.count - done)
                    guard result >= 0 || errno == EINTR else {
                        close(file)
                        throw BenchError("write \(temporary): errno \(errno)")
                    }
                    done += max(0, result)
                }
                guard close(file) == 0 else { throw BenchError("close \(temporary): errno \(errno)") }
                guard renameat(folder.descriptor, temporary, folder.descriptor, name) == 0 else {
                    throw BenchError("renameat \(temporary): errno \(errno)")
                }
            }
        }
    }

    /// Reads every file in `order` with plain POSIX calls.
    ///
    /// For each: `openat`, `fstat`, `read` of the whole file into a reused buffer, `close`.
    /// Returns the bytes read plus each file's first byte, as a checksum.
    static func read(names: [String], order: [Int], in folder: OpenFolder) throws -> UInt64 {
        let capacity = 1 << 16
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
        defer { buffer.deallocate() }
        var checksum: UInt64 = 0
        for index in order {
            let name = names[index]
            let file = openat(folder.descriptor, name, O_RDONLY | O_CLOEXEC)
            guard file >= 0 else { throw BenchError("openat \(name): errno \(errno)") }
            defer { close(file) }
            var status = stat()
            guard fstat(file, &status) == 0 else { throw BenchError("fstat \(name): errno \(errno)") }
            let size = min(Int(clamping: status.st_size), capacity)
            var done = 0
            while done < size {
                let result = Foundation.read(file, buffer + done, size - done)
                if result > 0 {
                    done += result
                } else if result == 0 {
                    break
                } else if errno != EINTR {
                    throw BenchError("read \(name): errno \(errno)")
                }
            }
            checksum &+= UInt64(done) &+ UInt64(done > 0 ? buffer.load(as: UInt8.self) : 0)
        }
        return checksum
    }
}
