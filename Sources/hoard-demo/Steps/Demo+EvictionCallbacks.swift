import Foundation
import Hoard

extension Demo {
    // MARK: 3

    static func evictionCallbacks() async throws {
        section(3, "Eviction callbacks (maxRamCount 3, maxDiskCount 5)")
        let printer = EvictionPrinter()  // held weakly by the cache: this constant keeps it alive
        let cache = try CacheBuilder<Article>()
            .containerName("demo-eviction")
            .directory(demoDirectory)
            .maxRamCount(3)
            .maxDiskCount(5)  // default policy .lfu: every post is set once, so the oldest goes first
            .delegate(printer)
            .build()
        explain("removeAll() so every run starts empty (it announces both clears):")
        cache.removeAll()

        explain("Setting 8 articles; memory keeps 3, so each set past the third evicts one from memory:")
        for number in 1...8 {
            let key = "post-\(number)"
            print("   set \"\(key)\"")
            cache[key] = Article(id: key, title: "Post number \(number)", fetchedAt: Date())
        }
        explain("flush(): the background writer lands the 8 files; disk keeps 5, so 3 are evicted:")
        await cache.flush()
        explain("memoryCount = \(cache.memoryCount), diskCount = \(cache.diskCount)")
        let post1 = cache["post-1"]
        explain("cache[\"post-1\"] → \(post1?.title ?? "nil") (evicted from both levels)")
        explain("cache[\"post-5\"] is on disk only; reading it copies it back into memory, which evicts another:")
        let post5 = cache["post-5"]
        explain(
            "cache[\"post-5\"] → \(post5?.title ?? "nil"); memoryCount = \(cache.memoryCount), diskCount = \(cache.diskCount)"
        )
        withExtendedLifetime(printer) {}
    }
}
