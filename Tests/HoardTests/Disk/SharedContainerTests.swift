import Foundation
import Testing

@testable import Hoard

/// What catching up with the shared container returns: the changes for the store to apply, and
/// the index they leave, against which a section a killed process left uncommitted is checked.
@Suite struct SharedContainerTests {
    @Test func anUncommittedSectionIsCheckedAgainstTheChangesFoundBeforeIt() {
        let (a, b, c) = (DiskKey("a").digest, DiskKey("b").digest, DiskKey("c").digest)
        let lookup = SharedContainer.EntryLookup(
            indexedExpiry: { $0 == c ? .at(5) : nil },
            storedHeader: { _ in nil }
        )
        var found = SharedContainer.CatchUp()
        #expect(found.indexedExpiry(of: c, lookup: lookup) == .at(5))
        found.append(.put(a, DiskEntryInfo(size: 1, expiresAt: .at(1)), key: "a"))
        #expect(found.indexedExpiry(of: a, lookup: lookup) == .at(1))
        found.append(.remove(a, key: "a"))
        #expect(found.indexedExpiry(of: a, lookup: lookup) == nil)
        // A snapshot replaces the store's index: its entries count, the store's do not any more.
        var snapshot = DiskEntryIndex(policy: .lru, capacity: 10)
        snapshot.upsert(DiskEntryInfo(size: 1, expiresAt: .at(2)), forKey: b)
        found.append(.load(snapshot))
        #expect(found.indexedExpiry(of: b, lookup: lookup) == .at(2))
        #expect(found.indexedExpiry(of: c, lookup: lookup) == nil)
        found.append(.clear)
        #expect(found.indexedExpiry(of: b, lookup: lookup) == nil)
        #expect(found.takeChanges().count == 4)
        #expect(found.changes.isEmpty)
    }

    @Test func anUncommittedRemovalKeepsTheExpiryACommittedPutBeforeItJournaled() async throws {
        let folder = TemporaryDirectory()
        do {
            let cache = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
            cache["key 0"] = "value 0"
            cache["key 1"] = "value 1"
            await cache.flush()
        }
        // Closed, so that no store of this process reads the journal before the next one opens.
        #expect(await waitUntil { !ContainerLock.isOpen(at: folder.container().path) })
        let digest = DiskKey("key 0").digest
        let size = try RawFiles.read(folder.container().appendingPathComponent(digest.hex).path).count
        // Another process set "key 0" to expire long ago, then was killed in a section that journaled
        // its removal (without the key, and so without an expiry) and did not unlink its file.
        let index = folder.container().appendingPathComponent(ContainerFile.index).path
        let records: [DiskJournal.Record] = [
            .begin, .put(digest: digest, size: size, expiresAt: .at(1), key: "key 0"), .commit,
            .begin, .remove(digest: digest, key: nil),
        ]
        try RawFiles.write(try RawFiles.read(index) + DiskJournal.encode(records), to: index)
        let cache = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        // The file is there, so the entry stays, with the expiry the journal gave it before.
        #expect(cache.diskCount == 2)
        #expect(cache.allKeys == ["key 1"])
        #expect(cache.disk?.invariantViolations() == [])
    }

    /// A process killed between journaling a write and renaming its file leaves the old file in
    /// place: the entry the next process counts holds the file's expiry, not the lost write's.
    @Test func anUncommittedWriteDoesNotLendItsExpiryToTheFileItDidNotReplace() async throws {
        let folder = TemporaryDirectory()
        do {
            let cache = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
            try await cache.save("value 0", forKey: "key 0")
            try await cache.save("value 1", forKey: "key 1", expiry: .date(Date(timeIntervalSince1970: 1)))
            await cache.flush()
        }
        #expect(await waitUntil { !ContainerLock.isOpen(at: folder.container().path) })
        // Another process set "key 0" to a value that expired long ago, and "key 1" to one that never
        // expires, then was killed after journaling both writes and before renaming either file.
        let index = folder.container().appendingPathComponent(ContainerFile.index).path
        let records: [DiskJournal.Record] = [
            .begin,
            .put(digest: DiskKey("key 0").digest, size: 99, expiresAt: .at(1), key: "key 0"),
            .put(digest: DiskKey("key 1").digest, size: 99, expiresAt: .never, key: "key 1"),
        ]
        try RawFiles.write(try RawFiles.read(index) + DiskJournal.encode(records), to: index)

        let cache = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        // The files hold what was saved: "key 0" is live, "key 1" expired.
        #expect(cache["key 0"] == "value 0")
        #expect(cache.allKeys == ["key 0"])
        #expect(cache.contains("key 0"))
        #expect(!cache.contains("key 1"))
        cache.removeExpired()
        #expect(cache["key 0"] == "value 0")
        #expect(folder.entryFiles() == [DiskKey("key 0").fileName])
        #expect(cache.disk?.invariantViolations() == [])
    }
}
