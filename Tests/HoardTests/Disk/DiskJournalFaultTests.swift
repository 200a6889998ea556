import Foundation
import Testing

@testable import Hoard

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

/// What the disk level does when the journal it shares with other processes cannot be trusted,
/// appended to, or locked: it changes nothing it cannot record, and nothing from a stale view.
@Suite struct DiskJournalFaultTests {
    /// The journal after the snapshot of the container's index file, decoded.
    private func journal(
        of folder: TemporaryDirectory
    ) throws -> (records: [DiskJournal.Record], ending: DiskJournal.Ending) {
        let bytes = try RawFiles.read(folder.container().appendingPathComponent(ContainerFile.index).path)
        return try bytes.withUnsafeBytes { buffer in
            let snapshot = try #require(DiskIndexFile.decodeSnapshot(buffer))
            let decoded = DiskJournal.decode(UnsafeRawBufferPointer(rebasing: buffer[snapshot.end...]))
            return (decoded.records, decoded.ending)
        }
    }

    @Test func aWriteWhoseJournalAppendFailsIsNotMadeAndLeavesWholeRecords() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        let disk = try #require(cache.disk)
        try await cache.save("1", forKey: "a")
        // A disk that fills up part way through the append of the next write's records.
        SharedContainer.testHooks.failNextAppend(afterBytes: 7, at: disk.directory.path)
        await #expect(throws: CacheError.self) { try await cache.save("2", forKey: "b") }
        // Not renamed in: a file that no index counts would never be evicted.
        #expect(folder.entryFiles() == [DiskKey("a").digest.hex])
        #expect(cache["b"] == nil)
        #expect(try journal(of: folder).ending == .clean)
        #expect(disk.invariantViolations() == [])
        // The next write goes through, and another store reads the journal as this one left it.
        try await cache.save("2", forKey: "b")
        let other = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        #expect(Set(other.allKeys) == ["a", "b"])
        #expect(other["b"] == "2")
        #expect(other.disk?.invariantViolations() == [])
    }

    @Test func aStoreThatCannotCatchUpWithOtherProcessesChangesNoFile() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        let disk = try #require(cache.disk)
        try await cache.save("1", forKey: "a")
        let path = disk.directory.path
        SharedContainer.testHooks.setCatchUpFails(true, at: path)
        defer { SharedContainer.testHooks.setCatchUpFails(false, at: path) }
        let before = try RawFiles.read(folder.container().appendingPathComponent(ContainerFile.index).path)
        await #expect(throws: CacheError.self) { try await cache.save("2", forKey: "b") }
        await cache.flush()
        #expect(folder.entryFiles() == [DiskKey("a").digest.hex])
        // No snapshot from a view that may miss other processes' records replaced theirs.
        #expect(try RawFiles.read(folder.container().appendingPathComponent(ContainerFile.index).path) == before)

        SharedContainer.testHooks.setCatchUpFails(false, at: path)
        try await cache.save("2", forKey: "b")
        #expect(folder.entryFiles().count == 2)
        #expect(cache["b"] == "2")
        #expect(disk.invariantViolations() == [])
    }

    @Test func theLimitsHoldAgainAfterAProcessDiedBeforeEvictingForItsWrites() async throws {
        let folder = TemporaryDirectory()
        let survivor = try folder.stringBuilder().maxRamCount(0).maxDiskCount(3).evictionPolicy(.lru)
            .build(sharingStore: false)
        for index in 0..<3 { try await survivor.save("value \(index)", forKey: "key \(index)") }
        // Another process wrote two entries and died before its section journaled their evictions:
        // its files are in place, its section has no commit.
        let source = try folder.stringBuilder("source").maxRamCount(0).build(sharingStore: false)
        var records: [DiskJournal.Record] = [.begin]
        for index in 3..<5 {
            let key = "key \(index)"
            try await source.save("value \(index)", forKey: key)
            let name = DiskKey(key).digest.hex
            let bytes = try RawFiles.read(folder.container("source").appendingPathComponent(name).path)
            try RawFiles.write(bytes, to: folder.container().appendingPathComponent(name).path)
            records.append(.put(digest: DiskKey(key).digest, size: bytes.count, expiresAt: .never, key: key))
        }
        let index = folder.container().appendingPathComponent(ContainerFile.index).path
        try RawFiles.write(try RawFiles.read(index) + DiskJournal.encode(records), to: index)

        await survivor.flush()
        #expect(survivor.diskCount == 3)
        #expect(folder.entryFiles().count == 3)
        // The oldest went: the dead process's writes are the newest.
        #expect(Set(survivor.allKeys) == ["key 2", "key 3", "key 4"])
        #expect(survivor["key 4"] == "value 4")
        #expect(survivor.disk?.invariantViolations() == [])
    }

    @Test func forgedHugeSizesInAnIntactIndexDoNotTrap() async throws {
        let folder = TemporaryDirectory()
        let keys = ["a", "b", "c"]
        do {
            let cache = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
            for key in keys { try await cache.save("value of \(key)", forKey: key) }
        }
        // An intact snapshot (its checksum matches) whose sizes add up past any integer.
        let records = keys.map { key in
            DiskIndexFile.Record(
                digest: DiskKey(key).digest,
                count: 1,
                info: DiskEntryInfo(size: Int.max / 2 + 1, expiresAt: .never)
            )
        }
        try RawFiles.write(
            DiskIndexFile.encode(records),
            to: folder.container().appendingPathComponent(ContainerFile.index).path
        )
        // Forged whole: the lock file's record of the index's length goes too (a shorter index than
        // recorded is rebuilt as cut short, which would hide the forged sizes).
        let lock = folder.container().appendingPathComponent(ContainerFile.lock).path
        try RawFiles.write(Array(try RawFiles.read(lock).prefix(8)), to: lock)
        let cache = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        #expect(cache.diskCount == 3)
        #expect(cache["b"] == "value of b")
        // With a byte limit, the forged entries do not fit, and go.
        let limited = try folder.stringBuilder().maxRamCount(0).maxDiskBytes(1 << 20).build(sharingStore: false)
        #expect(limited.diskCount == 0)
        #expect(limited.disk?.invariantViolations() == [])
    }

    @Test(arguments: [false, true])
    func anIndexCutAtARecordBoundaryIsRebuilt(copiedIntoPlace: Bool) async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        try await cache.save("first", forKey: "first")
        await cache.flush()
        let path = folder.container().appendingPathComponent(ContainerFile.index).path
        let before = try RawFiles.read(path).count
        for index in 0..<5 { try await cache.save("value \(index)", forKey: "key \(index)") }
        await cache.flush()
        // Cut exactly where the records of the later writes begin: what is left reads as whole.
        let bytes = try RawFiles.read(path)
        // In place, or as a copy (another inode, as a restored backup has).
        if copiedIntoPlace { try FileManager.default.removeItem(atPath: path) }
        try RawFiles.write(Array(bytes.prefix(before)), to: path)
        #expect(DiskIndexFile.entryCount(ofFile: try RawFiles.read(path)) == 1)
        let reopened = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        #expect(reopened.diskCount == 6)
        #expect(reopened["key 4"] == "value 4")
        #expect(reopened.disk?.invariantViolations() == [])
    }

    @Test func aCutAfterWhichAnIntactRecordFollowsIsDamageNotATornTail() {
        var bytes = DiskJournal.encode([
            .begin, .commit, .begin, .remove(digest: DiskKey("a").digest, key: nil), .commit,
        ])
        // The first record's length now reaches past the end, as a cut append's would, but whole
        // records follow it: cutting there would lose them.
        bytes[1] = 0x10
        #expect(bytes.withUnsafeBytes { DiskJournal.decode($0) }.ending == .damaged)
        // A real cut (nothing after it) is still a torn tail.
        let cut = Array(DiskJournal.encode([.begin, .remove(digest: DiskKey("a").digest, key: nil)]).dropLast(5))
        #expect(cut.withUnsafeBytes { DiskJournal.decode($0) }.ending == .tornTail)
    }

    @Test func aWholeFileLockOfAnEarlierReleaseFailsWritesInsteadOfHangingThem() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().maxRamCount(0).build()
        try await cache.save("1", forKey: "a")
        // An earlier release opened the container after this cache: it locks the whole lock file
        // for its cache's life.
        let earlier = try WorkerProcess(["hold-as-earlier-release", folder.url.path, "test"])
        #expect(await onPlainThread { earlier.readLine() } == "ready")
        await #expect(throws: CacheError.self) { try await cache.save("2", forKey: "b") }
        #expect(folder.entryFiles() == [DiskKey("a").digest.hex])
        #expect(cache["a"] == "1")

        earlier.closeInput()
        #expect(await onPlainThread { earlier.wait() } == .exited(0))
        try await cache.save("2", forKey: "b")
        #expect(cache["b"] == "2")
        #expect(cache.disk?.invariantViolations() == [])
    }
}
