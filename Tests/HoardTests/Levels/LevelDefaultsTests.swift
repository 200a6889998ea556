import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Carlos-style defaults: levels that need no arguments, a level as the builder's fetcher, a
/// fallback that sees the key.
@Suite struct LevelDefaultsTests {
    struct Article: Codable, Sendable, Equatable {
        var title: String
    }

    struct ArticleFetcher: Fetcher {
        let calls = Counter()
        func get(_ key: String) async throws -> Article {
            _ = calls.increment()
            return Article(title: "All about \(key)")
        }
    }

    @Test func aMemoryLevelKeepsAHundredValuesByDefault() {
        #expect(MemoryCacheLevel<String, Int>().capacity == 100)
    }

    @Test func theCarlosStyleCompositionWorksOnANamedContainer() async throws {
        let name = "hoard-tests-\(UUID().uuidString)"
        let folder = CacheBuilder<Article>.defaultDirectory.appendingPathComponent(name, isDirectory: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let fetcher = ArticleFetcher()
        let disk = DiskCacheLevel<String, Article>(named: name)
        let articles = MemoryCacheLevel<String, Article>().compose(disk).compose(fetcher)
        #expect(try await articles.get("swift") == Article(title: "All about swift"))
        #expect(try await articles.get("swift") == Article(title: "All about swift"))
        #expect(fetcher.calls.value == 1)
        await disk.flush()
        #expect(disk.count == 1)
        #expect(FileManager.default.fileExists(atPath: folder.path))
    }

    @Test(arguments: ["", "   ", "a/b", ".."])
    func aNamedLevelWithAnUnusableNameThrowsOnUse(name: String) async {
        let level = DiskCacheLevel<String, Article>(named: name)
        await #expect(throws: CacheError.invalidConfiguration) { try await level.get("k") }
        await #expect(throws: CacheError.invalidConfiguration) {
            try await level.set(Article(title: "t"), forKey: "k")
        }
    }

    @Test func aLevelCanBeTheBuildersFetcher() async throws {
        let folder = TemporaryDirectory()
        let fetcher = ArticleFetcher()
        let cache = try CacheBuilder<Article>().containerName("a").directory(folder.url)
            .fetcher(fetcher.transformValues(TwoWayTransformer(transform: { $0 }, inverseTransform: { $0 })))
            .build()
        #expect(try await cache.getOrFetch(forKey: "k") == Article(title: "All about k"))
        #expect(cache["k"] == Article(title: "All about k"))
        #expect(fetcher.calls.value == 1)
    }

    @Test func aFallbackCanSeeTheKey() async throws {
        let level = MemoryCacheLevel<String, String>().fallback { key, error in
            "placeholder for \(key) (\(error is CacheError))"
        }
        #expect(try await level.get("k") == "placeholder for k (true)")
    }
}
