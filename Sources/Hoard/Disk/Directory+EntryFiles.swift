import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Reading every entry file of a container, as a rebuild of its index does: the listing and the
/// reads make no string and no array per file.
extension Directory {
    /// The folder's names, split: the digests that the entry files' names spell (64 lowercase hex
    /// digits, parsed in place from the listing) and every other name (`.` and `..` left out).
    ///
    /// - Parameters:
    ///   - chunkSize: How many digests `listed` gets at a time.
    ///   - listed: If given, called with each `chunkSize` digests as soon as the listing has found
    ///     them, and with the last ones (fewer) once it is done, so that reading their files can
    ///     start while the folder is still being listed.
    /// - Returns: The entry files' digests and the other names, each in the listing's order.
    /// - Throws: ``CacheError/FileError`` when the folder cannot be read.
    /// - Complexity: One `readdir` pass; no `stat`, and no string for an entry file's name.
    func entryDigestsAndOtherNames(
        chunkSize: Int = 1_024,
        listed: (([SHA256Digest]) -> Void)? = nil
    ) throws(CacheError.FileError) -> (digests: [SHA256Digest], others: [String]) {
        precondition(chunkSize > 0, "entryDigestsAndOtherNames: a chunk holds at least one digest")
        let folder = self.folder
        var digests: [SHA256Digest] = []
        var others: [String] = []
        try withExtendedLifetime(folder) { () throws(CacheError.FileError) in
            try forEachName(in: folder.descriptor, path: ".") { name in
                let length = strlen(name)
                if length == 64, let digest = SHA256Digest(hexDigits: UnsafeRawBufferPointer(start: name, count: 64)) {
                    digests.append(digest)
                    // A copy: a slice would share the array's storage, copied whole at the next append.
                    if let listed, digests.count % chunkSize == 0 {
                        listed(Array(digests[(digests.count - chunkSize)...]))
                    }
                    return
                }
                let string = String(cString: name)
                if string != "." && string != ".." { others.append(string) }
            }
        }
        if let listed, !digests.isEmpty, digests.count % chunkSize > 0 {
            listed(Array(digests[(digests.count - digests.count % chunkSize)...]))
        }
        return (digests, others)
    }

    /// Reads the whole regular file named by `digest` (its ``SHA256Digest/hex``) into `buffer`, with
    /// its modification time, as ``readWithTime(_:)`` reads a file.
    ///
    /// - Returns: The file's bytes, inside `buffer` and valid until its next read; `nil` when nothing
    ///   has the name.
    /// - Throws: ``CacheError/FileError`` for any other failure, including a name that is not a regular file.
    /// - Complexity: One open, one `fstat`, one read for a file that ends where `fstat` said, one close.
    func readEntryFile(
        _ digest: SHA256Digest,
        into buffer: FileReadBuffer
    ) throws(CacheError.FileError) -> (bytes: UnsafeRawBufferPointer, modified: Double)? {
        try openEntryFile(digest, name: buffer.name) { file, size, modified throws(CacheError.FileError) in
            let bytes = buffer.reserve(size)
            let done = try fill(
                UnsafeMutableRawBufferPointer(start: bytes.baseAddress, count: size),
                from: file,
                digest
            )
            return (UnsafeRawBufferPointer(rebasing: bytes[0..<done]), modified)
        }
    }

    /// Reads the whole regular file named by `digest` into memory that lives only while `body` runs,
    /// and returns what `body` makes of the bytes; `nil` when nothing has the name.
    ///
    /// The read of a disk hit: the name is written on the stack and the bytes go to a temporary
    /// allocation (on the stack when small enough), so that no string and no array is made.
    /// - Throws: ``CacheError/FileError`` for any other failure, including a name that is not a regular file.
    /// - Complexity: One open, one `fstat`, one read for a file that ends where `fstat` said, one close.
    func withEntryFile<Decoded>(
        _ digest: SHA256Digest,
        _ body: (UnsafeRawBufferPointer) -> Decoded
    ) throws(CacheError.FileError) -> Decoded? {
        // Results rather than typed throws through `withUnsafeTemporaryAllocation`, which only
        // rethrows `any Error` in the standard libraries of older Apple SDKs.
        let read = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 65) { name in
            name[64] = 0
            return Result { () throws(CacheError.FileError) -> Decoded? in
                try openEntryFile(digest, name: name) { file, size, _ throws(CacheError.FileError) in
                    try withUnsafeTemporaryAllocation(byteCount: size, alignment: 16) { bytes in
                        Result { () throws(CacheError.FileError) in
                            let done = try fill(bytes, from: file, digest)
                            return body(UnsafeRawBufferPointer(rebasing: bytes[0..<done]))
                        }
                    }.get()
                }
            }
        }
        return try read.get()
    }

    /// Opens the regular file named by `digest`, and returns what `read` makes of it.
    ///
    /// The hex of `digest` is written to `name` (65 bytes, the last a NUL). `read` gets the file's
    /// descriptor, size and modification time; the file is closed after. `nil` when nothing has
    /// the name.
    private func openEntryFile<Read>(
        _ digest: SHA256Digest,
        name: UnsafeMutableBufferPointer<UInt8>,
        _ read: (_ file: Int32, _ size: Int, _ modified: Double) throws(CacheError.FileError) -> Read
    ) throws(CacheError.FileError) -> Read? {
        let folder = self.folder
        digest.writeHex(to: name)
        let file = name.withMemoryRebound(to: CChar.self) { name in
            openat(folder.descriptor, name.baseAddress!, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        }
        guard file >= 0 else {
            let number = errno
            if number == ENOENT { return nil }
            throw error("openat", digest.hex, number)
        }
        defer { close(file) }
        var status = stat()
        guard fstat(file, &status) == 0 else {
            let number = errno
            throw error("fstat", digest.hex, number)
        }
        guard status.st_mode & S_IFMT == S_IFREG else { throw error("read", digest.hex, EISDIR) }
        // A file larger than this platform's Int cannot be an entry here.
        guard let size = Int(exactly: status.st_size) else { throw error("read", digest.hex, EFBIG) }
        return try read(file, size, Platform.modificationTime(of: status))
    }

    /// Reads from `file` until `buffer` is full or the file ends; returns the count read (less than
    /// the buffer's when the file shrank since its size was taken).
    private func fill(
        _ buffer: UnsafeMutableRawBufferPointer,
        from file: Int32,
        _ digest: SHA256Digest
    ) throws(CacheError.FileError) -> Int {
        let (done, number) = RawIO.fill(buffer) { destination, length, _ in Platform.read(file, destination, length) }
        if number != 0 { throw error("read", digest.hex, number) }
        return done
    }
}

/// Memory reused to read many files one after another on one thread (see
/// ``Directory/readEntryFile(_:into:)``): the name being opened, and the bytes of the last file read.
///
/// Not `Sendable`: one thread owns it, and the bytes it returns are valid until its next read.
final class FileReadBuffer {
    /// A NUL-terminated file name of 64 characters.
    let name: UnsafeMutableBufferPointer<UInt8>
    private var storage: UnsafeMutableRawBufferPointer

    /// Makes a buffer that holds `capacity` bytes before it grows.
    init(capacity: Int = 16 << 10) {
        name = .allocate(capacity: 65)
        name.initialize(repeating: 0)
        storage = .allocate(byteCount: max(capacity, 1), alignment: 16)
    }

    deinit {
        name.deallocate()
        storage.deallocate()
    }

    /// The storage, grown to hold at least `count` bytes (its earlier contents are dropped).
    func reserve(_ count: Int) -> UnsafeMutableRawBufferPointer {
        if count > storage.count {
            storage.deallocate()
            storage = .allocate(byteCount: count, alignment: 16)
        }
        return storage
    }
}
