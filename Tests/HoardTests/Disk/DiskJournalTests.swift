import Foundation
import Testing

@testable import Hoard

/// The journal that follows the index snapshot: its records, its sections, and what a store makes
/// of a torn or damaged one.
@Suite struct DiskJournalTests {
    static let records: [DiskJournal.Record] = [
        .begin,
        .put(digest: DiskKey("a").digest, size: 40, expiresAt: .never, key: "a"),
        .put(digest: DiskKey("caf\u{E9}").digest, size: 9, expiresAt: .at(1_800_000_000.5), key: "caf\u{E9}"),
        .remove(digest: DiskKey("b").digest, key: nil),
        .remove(digest: DiskKey("caf\u{E9}").digest, key: "caf\u{E9}"),
        .commit,
        .begin, .clear, .commit,
        .begin, .sharedPending(key: "caf\u{E9}", until: 1_800_000_000.25), .sharedPending(key: "", until: 0),
        .sharedPending(key: nil, until: 1_800_000_030), .commit,
    ]

    @Test func recordsRoundTripAndEveryCutOrFlipIsCaught() {
        let bytes = DiskJournal.encode(Self.records)
        let decoded = bytes.withUnsafeBytes { DiskJournal.decode($0) }
        #expect(decoded.records == Self.records)
        #expect(decoded.end == bytes.count)
        #expect(decoded.ending == .clean)
        for length in 0..<bytes.count {
            let cut = Array(bytes.prefix(length)).withUnsafeBytes { DiskJournal.decode($0) }
            // A cut keeps the whole records before it, and reads as a torn tail, never as damage.
            #expect(cut.ending == (cut.end == length ? .clean : .tornTail))
            #expect(Self.records.starts(with: cut.records))
        }
        for offset in 0..<bytes.count {
            var flipped = bytes
            flipped[offset] ^= 0x04
            let read = flipped.withUnsafeBytes { DiskJournal.decode($0) }
            #expect(read.ending != .clean, "a flipped byte at \(offset) went unnoticed")
            #expect(Self.records.starts(with: read.records))
        }
    }

    @Test func sectionsWithoutACommitAreTold() {
        let put = DiskJournal.Record.put(digest: DiskKey("a").digest, size: 1, expiresAt: .never, key: "a")
        let sections = DiskJournal.sections([.begin, put, .commit, .begin, put, .begin, .clear, .commit, .begin, put])
        #expect(sections.map(\.isCommitted) == [true, false, true, false])
        #expect(sections.map(\.records.count) == [1, 1, 1, 1])
    }

    /// Bytes appended to the index file of a closed container.
    private func append(_ bytes: [UInt8], to folder: TemporaryDirectory) throws {
        let path = folder.container().appendingPathComponent(ContainerFile.index).path
        try RawFiles.write(try RawFiles.read(path) + bytes, to: path)
    }

    private func populate(_ folder: TemporaryDirectory, count: Int) async throws {
        let cache = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        for index in 0..<count { cache["key \(index)"] = "value \(index)" }
        await cache.flush()
    }

    @Test func aTornLastRecordMakesTheStoreRebuildFromTheEntryFiles() async throws {
        let folder = TemporaryDirectory()
        try await populate(folder, count: 5)
        let path = folder.container().appendingPathComponent(ContainerFile.index).path
        // A cut append, or a file cut short by damage: which one, and what was lost, is unknown.
        let torn = DiskJournal.encode([.begin, .remove(digest: DiskKey("key 0").digest, key: nil)])
        try append(Array(torn.dropLast(3)), to: folder)
        let cache = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        #expect(cache.diskCount == 5)
        #expect(cache["key 0"] == "value 0")
        #expect(cache.disk?.invariantViolations() == [])
        // Rebuilt and saved: the index file is an intact snapshot again.
        #expect(try RawFiles.read(path).withUnsafeBytes { DiskIndexFile.decode($0) }?.count == 5)
    }

    @Test func anIndexCutShortLosesNoEntry() async throws {
        let folder = TemporaryDirectory()
        // Many writes after the last snapshot: their records are all in the journal.
        let cache = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        try await cache.save("first", forKey: "first")
        await cache.flush()
        for index in 0..<20 { try await cache.save("value \(index)", forKey: "key \(index)") }
        await cache.flush()
        let path = folder.container().appendingPathComponent(ContainerFile.index).path
        let bytes = try RawFiles.read(path)
        try RawFiles.write(Array(bytes.prefix(bytes.count * 2 / 3)), to: path)
        let reopened = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        #expect(reopened.diskCount == 21)
        #expect(reopened.disk?.invariantViolations() == [])
    }

    @Test func anUncommittedSectionIsCheckedAgainstTheFiles() async throws {
        let folder = TemporaryDirectory()
        try await populate(folder, count: 5)
        // A process killed in the middle of a section: it journaled a put whose file never landed,
        // and the removal of an entry it did not get to unlink.
        try append(
            DiskJournal.encode([
                .begin,
                .put(digest: DiskKey("ghost").digest, size: 99, expiresAt: .never, key: "ghost"),
                .remove(digest: DiskKey("key 1").digest, key: nil),
            ]),
            to: folder
        )
        let cache = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        #expect(cache.diskCount == 5)
        #expect(Set(cache.allKeys) == Set((0..<5).map { "key \($0)" }))
        #expect(cache["key 1"] == "value 1")
        #expect(cache.disk?.invariantViolations() == [])
    }

    @Test func aDamagedJournalIsRebuiltFromTheEntryFiles() async throws {
        let folder = TemporaryDirectory()
        try await populate(folder, count: 5)
        // A committed section saying every entry is gone, with a damaged record in the middle.
        var bytes = DiskJournal.encode([.begin, .clear, .commit, .begin, .commit])
        bytes[6] ^= 0x01
        try append(bytes, to: folder)
        TestLog.install()
        let cache = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        #expect(cache.diskCount == 5)
        for index in 0..<5 { #expect(cache["key \(index)"] == "value \(index)") }
        #expect(TestLog.messages(containing: folder.container().path).contains { $0.message.contains("damaged") })
        // Rebuilt and saved: the index file is an intact snapshot again.
        let saved = try RawFiles.read(folder.container().appendingPathComponent(ContainerFile.index).path)
        #expect(saved.withUnsafeBytes { DiskIndexFile.decode($0) }?.count == 5)
    }

    @Test func anotherStoresChangesArriveThroughTheJournal() async throws {
        let folder = TemporaryDirectory()
        let first = try folder.stringBuilder().maxRamCount(0).maxDiskCount(3).evictionPolicy(.lru).build()
        // A second store, as another process has: it shares no memory with the first.
        let second = try folder.stringBuilder().maxRamCount(0).maxDiskCount(3).evictionPolicy(.lru)
            .build(sharingStore: false)
        first["a"] = "1"
        first["b"] = "2"
        await first.flush()
        second["c"] = "3"
        second["d"] = "4"  // the fourth entry: the second store evicts the first one's oldest
        await second.flush()
        await first.flush()
        #expect(first.diskCount == 3)
        #expect(second.diskCount == 3)
        #expect(Set(first.allKeys) == ["b", "c", "d"])
        #expect(folder.entryFiles().count == 3)
        #expect(first["a"] == nil)
        #expect(first["d"] == "4")
        #expect(first.disk?.invariantViolations() == [])
        #expect(second.disk?.invariantViolations() == [])
    }
}
