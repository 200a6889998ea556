import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension SharedContainer {
    /// Writes `records` as a new snapshot with an empty journal, and makes it the file `cursor`
    /// appends to; called inside a section (or while opening).
    ///
    /// - Parameters:
    ///   - records: The store's eviction order, next victim first.
    ///   - cursor: The store's cursor: on the new file once it is written (no commit is owed to it:
    ///     its snapshot holds the section's changes); as it was when the write failed.
    ///   - log: Receives what went wrong.
    /// - Returns: Whether the snapshot was written. When it was not, the journal stays the record
    ///   and the next section tries again.
    /// - Complexity: O(n) in the number of records.
    func writeSnapshot(_ records: [DiskIndexFile.Record], cursor: inout Cursor, log: inout DeferredLog) -> Bool {
        let bytes = DiskIndexFile.encode(records)
        do throws(CacheError.FileError) {
            // With no index yet (a new container, a rebuild), the file is written in place: readers
            // only read it under the section lock, and a kill leaves a short file, which fails its
            // checksum, rather than a temporary file. Otherwise it replaces the old one atomically,
            // so other stores finish reading the old journal through their descriptors.
            if case .success(nil) = directory.identity(of: ContainerFile.index) {
                try directory.writeNew(bytes, to: ContainerFile.index)
            } else {
                try directory.writeAtomically(bytes, to: ContainerFile.index, through: TemporaryFile.nextName())
            }
        } catch {
            log.add(.warning, "Cannot save the index of \(directory.path): \(error)")
            // With no index file open, an append fails for this reason.
            if cursor.descriptor < 0 { cursor.unavailable = error }
            return false
        }
        var opened = Cursor()
        do throws(CacheError.FileError) {
            let path = directory.path + "/" + ContainerFile.index
            guard let file = try directory.open(ContainerFile.index, flags: O_RDWR | O_APPEND) else {
                throw CacheError.FileError(operation: "openat", path: path, errorNumber: ENOENT)
            }
            var status = stat()
            guard fstat(file, &status) == 0 else {
                let error = CacheError.FileError(operation: "fstat", path: path, errorNumber: errno)
                close(file)
                throw error
            }
            opened = Cursor(descriptor: file, identity: FileIdentity(status), offset: bytes.count)
            opened.snapshotBytes = bytes.count
            directory.recordIndexEnd(identity: FileIdentity(status), length: bytes.count)
        } catch {
            opened.unavailable = error
        }
        let old = cursor.descriptor
        cursor = opened
        if old >= 0 { close(old) }
        return true
    }
}
