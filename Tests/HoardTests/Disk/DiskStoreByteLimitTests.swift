import Foundation
import Testing

@testable import Hoard

/// Tests for the byte limit of the disk store: the running total, eviction order, oversized entries.
@Suite struct DiskStoreByteLimitTests {
    init() { TestLog.install() }

    /// A value of `size` bytes.
    private func payload(_ size: Int) -> Data { Data(repeating: 0x61, count: size) }

    /// The size of the entry file for `key` holding `size` bytes.
    private func entrySize(_ key: String, _ size: Int) -> Int {
        EntryFormat.encode(key: key, payload: payload(size), schemaVersion: 0, expiresAt: .never).count
    }

    private func open(
        _ folder: TemporaryDirectory,
        policy: EvictionPolicy = .lru,
        byteLimit: Int?
    ) throws -> DiskStore {
        try DiskStore(at: folder.container(), options: .init(capacity: 100, policy: policy, byteLimit: byteLimit))
    }

    private func set(_ store: DiskStore, _ key: String, size: Int, observer: EvictionRecorder? = nil) {
        let data = payload(size)
        _ = store.enqueueWrite(
            DiskKey(key),
            value: PendingValue(value: data, serialize: { data }, expiresAt: .never),
            observer: observer
        )
    }

    private func isStored(_ store: DiskStore, _ key: String) -> Bool {
        if case .stored = store.lookup(DiskKey(key)) { return true }
        return false
    }

    /// The sum of the sizes of the entry files on disk.
    private func bytesOnDisk(_ folder: TemporaryDirectory) throws -> Int {
        try folder.entryFiles().reduce(0) { total, name in
            let path = folder.container().appendingPathComponent(name).path
            let size = try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber
            return total + (size?.intValue ?? 0)
        }
    }

    @Test func writesEvictInLRUOrderUntilTheBytesFit() async throws {
        let folder = TemporaryDirectory()
        let limit = entrySize("a", 100) + entrySize("b", 300) + entrySize("c", 50) + 10
        let store = try open(folder, byteLimit: limit)
        let recorder = EvictionRecorder()
        set(store, "a", size: 100)
        set(store, "b", size: 300)
        set(store, "c", size: 50)
        await store.flush()
        #expect(store.byteCount == limit - 10)
        #expect(isStored(store, "a"))  // LRU order now b, c, a
        set(store, "d", size: 200, observer: recorder)
        await store.flush()
        #expect(recorder.evicted.withLock { $0 } == ["b"])
        #expect(store.keysInEvictionOrder == ["c", "a", "d"])
        #expect(store.byteCount <= limit)
        #expect(store.byteCount == (try bytesOnDisk(folder)))
        #expect(store.byteCount == entrySize("a", 100) + entrySize("c", 50) + entrySize("d", 200))
    }

    @Test func writesEvictInLFUOrderNeverTheEntryJustWritten() async throws {
        let folder = TemporaryDirectory()
        let limit = entrySize("a", 100) + entrySize("b", 100) + entrySize("c", 100)
        let store = try open(folder, policy: .lfu, byteLimit: limit)
        let recorder = EvictionRecorder()
        for key in ["a", "b", "c"] { set(store, key, size: 100) }
        await store.flush()
        for _ in 0..<2 { #expect(isStored(store, "a")) }
        #expect(isStored(store, "c"))
        // "d" needs the room of two entries: "b" (1 access) goes, then "c" (2), never "a" (3).
        set(store, "d", size: 150, observer: recorder)
        await store.flush()
        #expect(recorder.evicted.withLock { $0 } == ["b", "c"])
        #expect(Set(store.keysInEvictionOrder) == ["a", "d"])
        #expect(store.byteCount == (try bytesOnDisk(folder)))
        #expect(store.byteCount <= limit)
    }

    @Test func aReplacementThatIsNextInLineIsSparedAndOthersGo() async throws {
        let folder = TemporaryDirectory()
        let limit = 3 * entrySize("x", 100) + 20
        let store = try open(folder, policy: .lfu, byteLimit: limit)
        let recorder = EvictionRecorder()
        for key in ["x", "y", "z"] { set(store, key, size: 100) }
        await store.flush()
        for _ in 0..<2 {
            #expect(isStored(store, "y"))
            #expect(isStored(store, "z"))
        }
        // Replaced, "x" has 2 accesses to the others' 3: it is the policy's next victim, yet kept.
        set(store, "x", size: 150, observer: recorder)
        await store.flush()
        #expect(recorder.evicted.withLock { $0 } == ["y"])
        #expect(Set(store.keysInEvictionOrder) == ["x", "z"])
        #expect(store.byteCount == entrySize("x", 150) + entrySize("z", 100))
        #expect(store.byteCount == (try bytesOnDisk(folder)))
    }

    @Test func anEntryLargerThanTheWholeLimitIsNotKeptAndEvictsNothing() async throws {
        let folder = TemporaryDirectory()
        let limit = entrySize("a", 100) * 3
        let store = try open(folder, byteLimit: limit)
        let recorder = EvictionRecorder()
        set(store, "a", size: 100)
        set(store, "b", size: 100)
        await store.flush()
        let before = store.byteCount
        set(store, "huge", size: limit, observer: recorder)
        await store.flush()
        #expect(!isStored(store, "huge"))
        #expect(isStored(store, "a"))
        #expect(isStored(store, "b"))
        #expect(store.byteCount == before)
        #expect(store.byteCount == (try bytesOnDisk(folder)))
        #expect(folder.entryFiles().count == 2)
        #expect(recorder.evicted.withLock { $0 } == ["huge"])
        #expect(TestLog.messages(containing: "\"huge\"").contains { $0.level == .info })
        // An older value of the key is not served once a too-large one replaced it.
        set(store, "a", size: limit)
        await store.flush()
        #expect(!isStored(store, "a"))
        #expect(Set(store.keysInEvictionOrder) == ["b"])
        #expect(store.byteCount == (try bytesOnDisk(folder)))
    }

    @Test func theByteLimitIsAppliedWhenAContainerIsReopenedSmaller() async throws {
        let folder = TemporaryDirectory()
        do {
            let store = try open(folder, byteLimit: nil)
            set(store, "a", size: 100)
            set(store, "b", size: 400)
            set(store, "c", size: 50)
            set(store, "d", size: 200)
            await store.flush()
            #expect(store.byteCount == (try bytesOnDisk(folder)))
        }
        let limit = entrySize("c", 50) + entrySize("d", 200) + 10
        let reopened = try open(folder, byteLimit: limit)
        #expect(reopened.keysInEvictionOrder == ["c", "d"])
        #expect(reopened.byteCount == (try bytesOnDisk(folder)))
        #expect(reopened.byteCount <= limit)
    }

    @Test func anEntryLargerThanTheLimitGoesAloneOnOpen() async throws {
        let folder = TemporaryDirectory()
        do {
            let store = try open(folder, byteLimit: nil)
            set(store, "a", size: 100)
            set(store, "b", size: 1_000)
            set(store, "c", size: 100)
            await store.flush()
        }
        let limit = entrySize("a", 100) + entrySize("c", 100)
        let reopened = try open(folder, byteLimit: limit)
        #expect(reopened.keysInEvictionOrder == ["a", "c"])
        #expect(reopened.byteCount == limit)
        #expect(reopened.byteCount == (try bytesOnDisk(folder)))
    }

    @Test func theByteCountFollowsRemovalsRepairsAndClears() async throws {
        let folder = TemporaryDirectory()
        let store = try open(folder, byteLimit: 10_000)
        for (index, key) in ["a", "b", "c"].enumerated() { set(store, key, size: 100 * (index + 1)) }
        set(store, "b", size: 20)  // replaced before and after landing
        await store.flush()
        set(store, "c", size: 10)
        await store.flush()
        #expect(store.byteCount == entrySize("a", 100) + entrySize("b", 20) + entrySize("c", 10))
        #expect(store.byteCount == (try bytesOnDisk(folder)))
        _ = store.enqueueRemove(DiskKey("a"), observer: nil)
        await store.flush()
        #expect(store.byteCount == entrySize("b", 20) + entrySize("c", 10))
        #expect(store.byteCount == (try bytesOnDisk(folder)))
        // A damaged file found by a read is removed, and its bytes with it.
        let damaged = folder.container().appendingPathComponent(DiskKey("b").fileName)
        try Data("garbage".utf8).write(to: damaged)
        #expect(!isStored(store, "b"))
        #expect(store.byteCount == entrySize("c", 10))
        #expect(store.byteCount == (try bytesOnDisk(folder)))
        store.removeAll()
        #expect(store.byteCount == 0)
        #expect(try bytesOnDisk(folder) == 0)
        // The total survives a reopen.
        set(store, "e", size: 70)
        await store.flush()
        let reopened = try open(folder, byteLimit: 10_000)
        #expect(reopened.byteCount == entrySize("e", 70))
    }

    @Test func sharedStoresCompareTheByteLimit() throws {
        let folder = TemporaryDirectory()
        let options = DiskStore.Options(capacity: 10, policy: .lru, byteLimit: 1_000)
        let store = try DiskStore.shared(at: folder.container(), options: options)
        // In use, as a level's or a cache's store is. A store nobody uses is only finishing its
        // writes: an opening with other settings would wait (up to two minutes, blocking a
        // cooperative thread) for a close that this test's own reference holds off.
        store.addLevelUser()
        defer { store.removeLevelUser() }
        #expect(try DiskStore.shared(at: folder.container(), options: options) === store)
        var other = options
        other.byteLimit = 2_000
        #expect(throws: CacheError.invalidConfiguration) {
            try DiskStore.shared(at: folder.container(), options: other)
        }
        other.byteLimit = nil
        #expect(throws: CacheError.invalidConfiguration) {
            try DiskStore.shared(at: folder.container(), options: other)
        }
    }
}
