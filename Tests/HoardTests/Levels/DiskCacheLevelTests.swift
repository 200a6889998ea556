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
        let writer = DiskCacheLevel<String, String>(
            directory: directory.container(),
            capacity: 10,
            serializer: StringSerializer()
        )
        try await writer.set("not a number", forKey: "key")
        await writer.flush()
        let reader = DiskCacheLevel<String, Int>(directory: directory.container(), capacity: 10)
        await #expect(throws: CacheError.notFound) { try await reader.get("key") }
    }
}
