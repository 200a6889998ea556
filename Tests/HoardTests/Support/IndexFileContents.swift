@testable import Hoard

extension DiskIndexFile {
    /// The number of entries an index file names once its journal is applied to its snapshot;
    /// `nil` when the snapshot is damaged, the journal does not end cleanly, or a section is left
    /// uncommitted (a file a closed cache left must be whole).
    static func entryCount(ofFile bytes: [UInt8]) -> Int? {
        bytes.withUnsafeBytes { buffer -> Int? in
            guard let snapshot = decodeSnapshot(buffer) else { return nil }
            let journal = DiskJournal.decode(UnsafeRawBufferPointer(rebasing: buffer[snapshot.end...]))
            let sections = DiskJournal.sections(journal.records)
            guard journal.ending == .clean, sections.allSatisfy(\.isCommitted) else { return nil }
            var digests = Set(snapshot.records.map(\.digest))
            for record in sections.flatMap(\.records) {
                switch record {
                case .put(let digest, _, _, _): digests.insert(digest)
                case .remove(let digest, _): digests.remove(digest)
                case .clear: digests.removeAll()
                case .begin, .commit, .sharedPending: break
                }
            }
            return digests.count
        }
    }
}
