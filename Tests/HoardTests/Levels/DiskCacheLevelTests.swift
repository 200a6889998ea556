import Foundation
import Testing

@testable import Hoard

/// Tests for `DiskCacheLevel`: misses, writes, persistence, unusable folders and serializers.
@Suite struct DiskCacheLevelTests {
    @Test func missThrowsNotFound() async {
        let directory = TemporaryDirectory()
        let level = DiskCacheLevel<String, String>(
            directory: directory.container(),
            capacity: 10,
            serializer: StringSerializer()
        )
        await #expect(throws: CacheError.notFound) { try await level.get("absent") }
    }

    @Test func setGetRemoveClear() async throws {
        let directory = TemporaryDirectory()
        let level = DiskCacheLevel<String, String>(
            directory: directory.container(),
            capacity: 10,
            serializer: StringSerializer()
        )
        try await level.set("one", forKey: "1")
        try await level.set("two", forKey: "2")
        #expect(try await level.get("1") == "one")
        await level.flush()
        #expect(level.count == 2)
        #expect(directory.entryFiles().count == 2)
        #expect(try await level.get("2") == "two")
        try await level.removeValue(forKey: "1")
        await #expect(throws: CacheError.notFound) { try await level.get("1") }
        await level.clear()
        await #expect(throws: CacheError.notFound) { try await level.get("2") }
        await level.flush()
        #expect(level.count == 0)
        #expect(directory.entryFiles().isEmpty)
    }

    @Test func aCacheOnTheSameContainerSeesTheLevelsChanges() async throws {
        let directory = TemporaryDirectory()
        let cache = try directory.stringBuilder().maxDiskCount(10).build()
        let level = DiskCacheLevel<String, String>(
            directory: directory.container(),
            capacity: 10,
            serializer: StringSerializer()
        )
        cache["k"] = "old"
        try await level.set("new", forKey: "k")
        #expect(cache["k"] == "new")
        try await level.removeValue(forKey: "k")
        #expect(cache["k"] == nil)
        cache["j"] = "cached"
        await level.clear()
        #expect(cache["j"] == nil)
    }

    @Test func persistsAcrossInstancesAfterFlush() async throws {
        let directory = TemporaryDirectory()
        do {
            let first = DiskCacheLevel<String, [Int]>(directory: directory.container(), capacity: 10)
            try await first.set([1, 2, 3], forKey: "numbers")
            await first.flush()
        }
        let second = DiskCacheLevel<String, [Int]>(directory: directory.container(), capacity: 10)
        #expect(try await second.get("numbers") == [1, 2, 3])
    }

    @Test func urlKeysUseTheirAbsoluteString() async throws {
        let directory = TemporaryDirectory()
        let level = DiskCacheLevel<URL, String>(directory: directory.container(), capacity: 10)
        let url = try #require(URL(string: "https://example.com/a?b=1"))
        try await level.set("page", forKey: url)
        #expect(try await level.get(url) == "page")
        let byString = DiskCacheLevel<String, String>(directory: directory.container(), capacity: 10)
        #expect(try await byString.get("https://example.com/a?b=1") == "page")
    }

    @Test func unusableDirectoryThrowsTheIOError() async throws {
        let directory = TemporaryDirectory()
        let file = directory.url.appendingPathComponent("a-file")
        try Data("x".utf8).write(to: file)
        let level = DiskCacheLevel<String, String>(
            directory: file.appendingPathComponent("inside", isDirectory: true),
            capacity: 10,
            serializer: StringSerializer()
        )
        await #expect(throws: CacheError.io) { try await level.get("key") }
        await #expect(throws: CacheError.io) { try await level.set("value", forKey: "key") }
        await #expect(throws: CacheError.io) { try await level.removeValue(forKey: "key") }
        await level.clear()
        await level.flush()
        #expect(level.count == 0)
    }

    /// A serializer that cannot encode anything.
    struct FailingSerializer: CacheSerializer {
        func serialize(_ value: String) throws -> Data { throw TestFailure("encode") }
        func deserialize(_ data: Data) throws -> String { throw TestFailure("decode") }
    }

    @Test func serializerFailureReachesTheSetter() async throws {
        let directory = TemporaryDirectory()
        let level = DiskCacheLevel<String, String>(
            directory: directory.container(),
            capacity: 10,
            serializer: FailingSerializer()
        )
        await #expect(throws: CacheError.serializationFailed) { try await level.set("value", forKey: "key") }
        await #expect(throws: CacheError.notFound) { try await level.get("key") }
    }

    @Test func undecodableFileIsAMiss() async throws {
        let directory = TemporaryDirectory()
        let level = DiskCacheLevel<String, String>(
            directory: directory.container(),
            capacity: 10,
            serializer: PickySerializer(refusingToRead: "not a number")
        )
        try await level.set("not a number", forKey: "key")
        await level.flush()
        await #expect(throws: CacheError.notFound) { try await level.get("key") }
    }

    // MARK: - Byte limit

    /// The size of the entry file the level writes for `key` holding `size` bytes.
    private func entrySize(_ key: String, _ size: Int) -> Int {
        EntryFormat.encode(key: key, payload: Data(count: size), schemaVersion: 0, expiresAt: .never).count
    }

    /// The sum of the sizes of the entry files on disk.
    private func bytesOnDisk(_ directory: TemporaryDirectory) throws -> Int {
        try directory.entryFiles().reduce(0) { total, name in
            let path = directory.container().appendingPathComponent(name).path
            let size = try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber
            return total + (size?.intValue ?? 0)
        }
    }

    private func byteLimitedLevel(_ directory: TemporaryDirectory, byteLimit: Int) -> DiskCacheLevel<String, Data> {
        DiskCacheLevel<String, Data>(
            directory: directory.container(),
            capacity: 1_000,
            byteLimit: byteLimit,
            serializer: DataSerializer()
        )
    }

    @Test func theByteLimitHoldsAfterEveryFlushWithMixedSizes() async throws {
        let directory = TemporaryDirectory()
        let limit = 4_000
        let level = byteLimitedLevel(directory, byteLimit: limit)
        for index in 0..<40 {
            let key = "key \(index)"
            try await level.set(Data(count: (index * 377) % 1_500 + 1), forKey: key)
            await level.flush()
            #expect(level.byteCount <= limit)
            #expect(level.byteCount == (try bytesOnDisk(directory)))
            #expect(level.count == directory.entryFiles().count)
            #expect(try await level.get(key).count == (index * 377) % 1_500 + 1)
        }
    }

    @Test func theByteLimitEvictsInThePolicysOrder() async throws {
        let directory = TemporaryDirectory()
        let limit = entrySize("a", 100) + entrySize("b", 100) + entrySize("c", 100)
        let level = byteLimitedLevel(directory, byteLimit: limit)
        for key in ["a", "b", "c"] { try await level.set(Data(count: 100), forKey: key) }
        await level.flush()
        for _ in 0..<2 { _ = try await level.get("a") }
        _ = try await level.get("c")
        try await level.set(Data(count: 150), forKey: "d")
        await level.flush()
        // W-TinyLFU, the default: four entries of a level of 1 000 all fit in its window, which is
        // least recently used first. "b" (read least recently) went first, then "a"; "c" (read
        // last) and "d" (just written) stay.
        await #expect(throws: CacheError.notFound) { try await level.get("b") }
        await #expect(throws: CacheError.notFound) { try await level.get("a") }
        #expect(try await level.get("c").count == 100)
        #expect(try await level.get("d").count == 150)
        #expect(level.byteCount == entrySize("c", 100) + entrySize("d", 150))
        #expect(level.byteCount == (try bytesOnDisk(directory)))
    }

    @Test func aValueLargerThanTheByteLimitIsNotKeptAndEvictsNothing() async throws {
        let directory = TemporaryDirectory()
        let limit = 1_000
        let level = byteLimitedLevel(directory, byteLimit: limit)
        try await level.set(Data(count: 300), forKey: "a")
        try await level.set(Data(count: 300), forKey: "b")
        await level.flush()
        let before = level.byteCount
        try await level.set(Data(count: limit), forKey: "huge")
        await level.flush()
        await #expect(throws: CacheError.notFound) { try await level.get("huge") }
        #expect(try await level.get("a").count == 300)
        #expect(try await level.get("b").count == 300)
        #expect(level.count == 2)
        #expect(level.byteCount == before)
        #expect(level.byteCount == (try bytesOnDisk(directory)))
    }

    @Test func theByteCountIsRightAfterRemoveAndClear() async throws {
        let directory = TemporaryDirectory()
        let level = byteLimitedLevel(directory, byteLimit: 100_000)
        try await level.set(Data(count: 10), forKey: "a")
        try await level.set(Data(count: 2_000), forKey: "b")
        await level.flush()
        #expect(level.byteCount == entrySize("a", 10) + entrySize("b", 2_000))
        try await level.removeValue(forKey: "b")
        await level.flush()
        #expect(level.byteCount == entrySize("a", 10))
        #expect(level.byteCount == (try bytesOnDisk(directory)))
        await level.clear()
        #expect(level.byteCount == 0)
        #expect(try bytesOnDisk(directory) == 0)
    }
}
