import Foundation
import Testing

@testable import Hoard

/// `temporaryContainer()`: a fresh folder per cache, gone once the last cache on it is.
@Suite struct TemporaryContainerTests {
    @Test func eachCacheGetsAFreshFolderRemovedWhenItIsReleased() async throws {
        var first: Cache<String>? = try CacheBuilder<String>(serializer: StringSerializer()).temporaryContainer()
            .build()
        let second = try CacheBuilder<String>(serializer: StringSerializer()).temporaryContainer().build()
        let firstFolder = try #require(first?.disk?.directory.path)
        let secondFolder = try #require(second.disk?.directory.path)
        #expect(firstFolder != secondFolder)
        #expect(firstFolder.hasPrefix(FileManager.default.temporaryDirectory.resolvingSymlinksInPath().path))
        first?["k"] = "v"
        second["k"] = "other"
        await first?.flush()
        #expect(FileManager.default.fileExists(atPath: firstFolder))
        #expect(first?["k"] == "v")
        first = nil
        let root = URL(fileURLWithPath: firstFolder).deletingLastPathComponent().path
        #expect(await waitUntil { !FileManager.default.fileExists(atPath: root) })
        #expect(second["k"] == "other")
        #expect(FileManager.default.fileExists(atPath: secondFolder))
    }

    @Test func pendingWritesLandBeforeTheFolderGoesAndNothingIsLeft() async throws {
        var cache: Cache<String>? = try CacheBuilder<String>(serializer: StringSerializer())
            .containerName("named").temporaryContainer().build()
        let folder = try #require(cache?.disk?.directory.path)
        #expect(folder.hasSuffix("/named"))
        for index in 0..<200 { cache?["k\(index)"] = "v" }
        cache = nil  // the writer may still be writing: it holds the store until it is done
        let root = URL(fileURLWithPath: folder).deletingLastPathComponent().path
        #expect(await waitUntil { !FileManager.default.fileExists(atPath: root) })
    }
}
