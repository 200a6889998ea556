import Foundation
import Testing

@testable import Hoard

@Suite struct DiskStoreTests {
    init() { TestLog.install() }

    /// Writes `count` entries "key i" = "value i" and returns the folder; the cache is released.
    private func populate(_ folder: TemporaryDirectory, count: Int) async throws {
        let cache = try folder.stringBuilder().maxRamCount(0).build()
        for index in 0..<count { cache["key \(index)"] = "value \(index)" }
        await cache.flush()
    }

    private func reopen(_ folder: TemporaryDirectory) throws -> Cache<String> {
        try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
    }

    private func path(of key: String, in folder: TemporaryDirectory) -> String {
        folder.container().appendingPathComponent(DiskKey(key).fileName).path
    }

    static let hostileKeys: [String] = [
        "", ".", "..", "/", "../../etc/passwd", "/etc/passwd", "a/b/c", "nul\0byte", "\0",
        String(repeating: "x", count: 5_000), "🦄🔥", "Key", "key", "KEY", "\u{E9}", "\\", "~", "-rf",
        "\n\r\t", "%2e%2e%2f", "שלום", "\u{202E}evil", ".hoard-index", ".hoard-tmp-1-1",
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    ]

    @Test func hostileKeysRoundTripAndStayInsideTheContainer() async throws {
        let folder = TemporaryDirectory()
        let sentinel = folder.url.appendingPathComponent("outside.txt")
        try Data("untouched".utf8).write(to: sentinel)
        do {
            let cache = try folder.stringBuilder().build()
            for (index, key) in Self.hostileKeys.enumerated() { cache[key] = "value \(index)" }
            await cache.flush()
            cache.clearMemory()
            for (index, key) in Self.hostileKeys.enumerated() { #expect(cache[key] == "value \(index)") }
            #expect(cache.diskCount == Self.hostileKeys.count)
        }
        let reopened = try reopen(folder)
        for (index, key) in Self.hostileKeys.enumerated() { #expect(reopened[key] == "value \(index)") }
        #expect(Set(reopened.disk?.keysInEvictionOrder ?? []) == Set(Self.hostileKeys))
        // Nothing but the container (entries and index) and the sentinel exist below the folder.
        let paths = folder.allPaths()
        let containerFiles = ["test/.hoard-index", "test/.hoard-lock"] + folder.entryFiles().map { "test/" + $0 }
        let expected = Set(["outside.txt", "test"] + containerFiles)
        #expect(Set(paths) == expected)
        #expect(folder.entryFiles().count == Self.hostileKeys.count)
        #expect(try String(contentsOf: sentinel, encoding: .utf8) == "untouched")
        for key in Self.hostileKeys { reopened.removeValue(forKey: key) }
        await reopened.flush()
        #expect(folder.entryFiles().isEmpty)
    }

    @Test func canonicallyEquivalentKeysAreOneKeyInBothLevels() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().build()
        cache["caf\u{E9}"] = "precomposed"
        #expect(cache["cafe\u{301}"] == "precomposed")
        cache["cafe\u{301}"] = "decomposed"
        await cache.flush()
        #expect(cache.diskCount == 1)
        cache.clearMemory()
        #expect(cache["caf\u{E9}"] == "decomposed")
    }

    enum Damage: String, CaseIterable, Sendable {
        case truncated, flippedPayloadByte, flippedHeaderByte, zeroLength, garbage, otherKeysEntry, directory, symlink
    }

    @Test(arguments: Damage.allCases)
    func aDamagedEntryIsAMissRemovedAndLogged(damage: Damage) async throws {
        let folder = TemporaryDirectory()
        try await populate(folder, count: 3)
        let victim = path(of: "key 1", in: folder)
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: victim)))
        switch damage {
        case .truncated: bytes.removeLast(3)
        case .flippedPayloadByte: bytes[bytes.count - 6] ^= 1
        case .flippedHeaderByte: bytes[13] ^= 0x80
        case .zeroLength: bytes = []
        case .garbage: bytes = Array("definitely not an entry".utf8)
        case .otherKeysEntry: bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path(of: "key 2", in: folder))))
        case .directory, .symlink: break
        }
        try FileManager.default.removeItem(atPath: victim)
        switch damage {
        case .directory: try FileManager.default.createDirectory(atPath: victim, withIntermediateDirectories: false)
        case .symlink:
            try FileManager.default.createSymbolicLink(
                atPath: victim,
                withDestinationPath: path(of: "key 0", in: folder)
            )
        default: try Data(bytes).write(to: URL(fileURLWithPath: victim))
        }

        let cache = try reopen(folder)
        #expect(cache["key 1"] == nil)
        #expect(cache["key 0"] == "value 0")
        #expect(cache["key 2"] == "value 2")
        #expect(!FileManager.default.fileExists(atPath: victim))
        #expect(!TestLog.messages(containing: folder.url.path).filter { $0.level == .warning }.isEmpty)
        if damage == .symlink { #expect(cache["key 0"] == "value 0") }  // the link's target is untouched
        // The cache stays usable for that key.
        cache["key 1"] = "fresh"
        await cache.flush()
        cache.clearMemory()
        #expect(cache["key 1"] == "fresh")
    }

    @Test func aDamagedFileFoundWhileRebuildingIsRemoved() async throws {
        let folder = TemporaryDirectory()
        try await populate(folder, count: 4)
        try FileManager.default.removeItem(at: folder.container().appendingPathComponent(".hoard-index"))
        try Data("garbage".utf8).write(to: URL(fileURLWithPath: path(of: "key 3", in: folder)))
        let cache = try reopen(folder)
        #expect(cache.diskCount == 3)
        #expect(folder.entryFiles().count == 3)
        #expect(cache["key 0"] == "value 0")
        #expect(cache["key 3"] == nil)
    }

    @Test(arguments: ["missing", "garbled", "truncated", "stale"])
    func theIndexIsRebuiltFromTheEntryFiles(problem: String) async throws {
        let folder = TemporaryDirectory()
        let indexURL = folder.container().appendingPathComponent(".hoard-index")
        try await populate(folder, count: 10)
        switch problem {
        case "missing":
            try FileManager.default.removeItem(at: indexURL)
        case "garbled":
            var bytes = try [UInt8](Data(contentsOf: indexURL))
            bytes[20] ^= 0xFF
            try Data(bytes).write(to: indexURL)
        case "truncated":
            let bytes = try Data(contentsOf: indexURL)
            try bytes.prefix(bytes.count / 2).write(to: indexURL)
        default:
            // An index from an older state: entries added and removed since.
            let old = try Data(contentsOf: indexURL)
            let cache = try reopen(folder)
            cache["late"] = "added after the index was saved"
            cache.removeValue(forKey: "key 0")
            await cache.flush()
            try old.write(to: indexURL)
        }
        let cache = try reopen(folder)
        let expected = 10  // for "stale": 10 keys, less "key 0", plus "late"
        #expect(cache.diskCount == expected)
        #expect(Set(cache.disk?.keysInEvictionOrder ?? []).count == expected)
        for index in (problem == "stale" ? 1 : 0)..<10 { #expect(cache["key \(index)"] == "value \(index)") }
        if problem == "stale" {
            #expect(cache["late"] == "added after the index was saved")
            #expect(cache["key 0"] == nil)
        }
        await cache.flush()
        #expect(FileManager.default.fileExists(atPath: indexURL.path))
    }

    @Test func temporaryFilesAreSweptAndNeverCounted() async throws {
        let folder = TemporaryDirectory()
        try await populate(folder, count: 2)
        let leftover = folder.container().appendingPathComponent(".hoard-tmp-999-1")
        try Data("half written".utf8).write(to: leftover)
        let unrelated = folder.container().appendingPathComponent("notes.txt")
        try Data("not ours".utf8).write(to: unrelated)
        let cache = try reopen(folder)
        #expect(cache.diskCount == 2)
        #expect(!FileManager.default.fileExists(atPath: leftover.path))
        // A file whose name is not an entry's is not ours to delete.
        #expect(FileManager.default.fileExists(atPath: unrelated.path))
    }

    @Test func theCountLimitIsAppliedWhenAContainerIsReopenedSmaller() async throws {
        let folder = TemporaryDirectory()
        try await populate(folder, count: 10)
        let cache = try folder.stringBuilder().maxRamCount(0).maxDiskCount(4).build(sharingStore: false)
        #expect(cache.diskCount == 4)
        #expect(folder.entryFiles().count == 4)
    }

    @Test func entryFilesAreOwnerOnly() async throws {
        let folder = TemporaryDirectory()
        try await populate(folder, count: 1)
        let file = try #require(folder.entryFiles().first)
        let attributes = try FileManager.default.attributesOfItem(
            atPath: folder.container().appendingPathComponent(file).path
        )
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
    }
}

/// Tests for the byte limit of the disk store: the running total, eviction order, oversized entries.
@Suite struct DiskStoreByteLimitTests {
    init() { TestLog.install() }

    /// Records the evictions a store reports.
    final class EvictionRecorder: DiskStoreObserver {
        let evicted = Locked<[String]>([])
        func diskStore(willEvictKey key: String, reason: EvictionReason) { evicted.withLock { $0.append(key) } }
        func diskStore(didFailToStoreKey key: String, error: CacheError) {}
        func diskStoreDidChange(key: String) {}
        func diskStoreDidClear() {}
    }

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
