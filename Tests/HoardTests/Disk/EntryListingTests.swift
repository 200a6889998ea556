import Foundation
import Testing

@testable import Hoard

/// The listing that a rebuild reads the entry files from while it goes: its chunks add up to it.
@Suite struct EntryListingTests {
    init() { TestLog.install() }

    /// Every digest comes in exactly one chunk, in the listing's order, the chunks full but the
    /// last; other names come apart, and no chunk is empty.
    @Test(arguments: [0, 1, 9, 10])
    func theChunksAddUpToTheListingInItsOrder(entries: Int) throws {
        let folder = TemporaryDirectory()
        let url = folder.container()
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        for index in 0..<entries {
            try RawFiles.write([1], to: url.appendingPathComponent(DiskKey("key \(index)").fileName).path)
        }
        for name in [ContainerFile.temporaryPrefix + "1-2-3", "notes.txt"] {
            try RawFiles.write([1], to: url.appendingPathComponent(name).path)
        }
        var log = DeferredLog()
        let directory = try Directory(creatingAt: url, log: &log)
        var chunks: [[SHA256Digest]] = []
        let listing = try directory.entryDigestsAndOtherNames(chunkSize: 3) { chunks.append($0) }

        #expect(Set(listing.digests) == Set((0..<entries).map { DiskKey("key \($0)").digest }))
        #expect(listing.digests.count == entries)
        #expect(chunks.flatMap { $0 } == listing.digests)
        #expect(chunks.dropLast().allSatisfy { $0.count == 3 })
        #expect(chunks.allSatisfy { !$0.isEmpty })
        #expect(chunks.count == (entries + 2) / 3)
        #expect(Set(listing.others).isSuperset(of: [ContainerFile.temporaryPrefix + "1-2-3", "notes.txt"]))
        // Without a callback, the same listing.
        #expect(try directory.entryDigestsAndOtherNames().digests == listing.digests)
    }
}
