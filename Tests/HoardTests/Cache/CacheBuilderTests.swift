import Foundation
import Testing

@testable import Hoard

private struct User: Codable, Sendable, Equatable {
    let id: String
    var name: String
}

@Suite struct CacheBuilderTests {
    private func configurationError(_ build: () throws -> Cache<User>) -> CacheError? {
        do {
            _ = try build()
            return nil
        } catch let error as CacheError {
            return error
        } catch {
            return nil
        }
    }

    @Test func defaultsMatchTheDesign() throws {
        let builder = CacheBuilder<User>()
        #expect(builder.maxRamCount == 100)
        #expect(builder.maxDiskCount == 1_000)
        #expect(builder.evictionPolicy == .wTinyLFU)
        #expect(builder.maxRetryCount == 0)
        #expect(builder.serializer is CodableSerializer<User>)
        #expect(builder.containerName == nil)
    }

    @Test func aMissingContainerNameIsRejected() {
        let error = configurationError { try CacheBuilder<User>().build() }
        #expect(error?.code == .invalidConfiguration)
        #expect(error?.message.contains("containerName") == true)
    }

    @Test(arguments: ["", "a/b", "/", "..", "../up", "x..y", ".", "nul\0byte"])
    func aPathLikeContainerNameIsRejected(name: String) {
        let folder = TemporaryDirectory()
        let error = configurationError { try CacheBuilder<User>().containerName(name).directory(folder.url).build() }
        #expect(error?.code == .invalidConfiguration)
        #expect(error?.message.contains("containerName") == true)
        #expect(folder.allPaths().isEmpty)
    }

    @Test func negativeCountsAreRejectedNamingTheOption() {
        let folder = TemporaryDirectory()
        let base = CacheBuilder<User>().containerName("c").directory(folder.url)
        #expect(configurationError { try base.maxRamCount(-1).build() }?.message.contains("maxRamCount") == true)
        #expect(configurationError { try base.maxDiskCount(-5).build() }?.message.contains("maxDiskCount") == true)
        #expect(configurationError { try base.maxRetryCount(-1).build() }?.message.contains("maxRetryCount") == true)
    }

    @Test func buildCreatesTheContainerWithOwnerOnlyPermissions() throws {
        let folder = TemporaryDirectory()
        _ = try CacheBuilder<User>().containerName("users").directory(folder.url.appendingPathComponent("deep/er"))
            .build()
        let path = folder.url.appendingPathComponent("deep/er/users").path
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect(attributes[.type] as? FileAttributeType == .typeDirectory)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o700)
    }

    @Test func anUnusableDirectoryGivesAnIOError() throws {
        let folder = TemporaryDirectory()
        let file = folder.url.appendingPathComponent("plain-file")
        try Data("x".utf8).write(to: file)
        let error = configurationError { try CacheBuilder<User>().containerName("c").directory(file).build() }
        #expect(error?.code == .io)
        #expect(error?.underlyingError != nil)
    }

    @Test func aZeroCountTurnsThatLevelOff() async throws {
        let folder = TemporaryDirectory()
        let memoryOnly = try folder.stringBuilder("memory").maxDiskCount(0).build()
        memoryOnly["a"] = "1"
        await memoryOnly.flush()
        #expect(memoryOnly["a"] == "1")
        #expect(memoryOnly.diskCount == 0)
        #expect(!FileManager.default.fileExists(atPath: folder.container("memory").path))

        let diskOnly = try folder.stringBuilder("disk").maxRamCount(0).build()
        diskOnly["a"] = "1"
        await diskOnly.flush()
        #expect(diskOnly.memoryCount == 0)
        #expect(diskOnly.diskCount == 1)
        #expect(diskOnly["a"] == "1")
    }

    @Test func optionsReachTheCache() throws {
        let folder = TemporaryDirectory()
        let delegate = RecordingDelegate<User>()
        let cache = try CacheBuilder<User>()
            .containerName("users")
            .directory(folder.url)
            .maxRamCount(7)
            .maxDiskCount(9)
            .evictionPolicy(.lru)
            .maxRetryCount(2)
            .delegate(delegate)
            .fetcher { User(id: $0, name: "fetched") }
            .build()
        #expect(cache.maxRetryCount == 2)
        #expect(cache.delegate === delegate)
        #expect(cache.memory?.capacity == 7)
        #expect(cache.memory?.policy == .lru)
        #expect(cache.disk?.options.capacity == 9)
        #expect(cache.disk?.options.policy == .lru)
    }

    @Test func theDelegateIsHeldWeakly() throws {
        let folder = TemporaryDirectory()
        var delegate: RecordingDelegate<User>? = RecordingDelegate<User>()
        weak let weakDelegate = delegate
        let cache = try CacheBuilder<User>().containerName("c").directory(folder.url).delegate(delegate!).build()
        #expect(cache.delegate != nil)
        delegate = nil
        #expect(weakDelegate == nil)
        #expect(cache.delegate == nil)
    }

    @Test func aCustomSerializerReplacesTheDefault() async throws {
        let folder = TemporaryDirectory()
        let cache = try CacheBuilder<String>()
            .serializer(StringSerializer())
            .containerName("strings")
            .directory(folder.url)
            .build()
        cache["k"] = "plain text"
        await cache.flush()
        let file = try #require(folder.entryFiles(in: "strings").first)
        let bytes = try Data(contentsOf: folder.container("strings").appendingPathComponent(file))
        // StringSerializer stores raw UTF-8, JSON would add quotes.
        #expect(bytes.range(of: Data("plain text".utf8)) != nil)
        #expect(bytes.range(of: Data("\"plain text\"".utf8)) == nil)
    }
}
