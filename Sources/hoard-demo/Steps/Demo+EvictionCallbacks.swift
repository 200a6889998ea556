import Foundation
import Hoard

extension Demo {
    // MARK: 3

    /// Step 3: what a full level evicts, as the delegate hears it.
    static func evictionCallbacks(in folder: URL) async throws {
        section(3, "Eviction callbacks (maxRamCount 3, maxDiskCount 5)")
        let delegate = DelegateLog()  // held weakly by the cache: this constant keeps it alive
        var heardAboutMemory = StreamPrinter(delegate.memory) { $0 }
        var heardAboutDisk = StreamPrinter(delegate.disk) { $0 }
        let cache = try CacheBuilder<Article>()
            .containerName("eviction")
            .directory(folder)
            .maxRamCount(3)
            .maxDiskCount(5)
            .evictionPolicy(.lfu)  // every post is set once, so the oldest goes first
            .delegate(delegate)
            .build()
        explain("Setting 8 articles; memory keeps 3, so each set past the third evicts one from memory:")
        for number in 1...8 {
            let key = "post-\(number)"
            print("   set \"\(key)\"")
            cache[key] = Article(id: key, title: "Post number \(number)")
            await heardAboutMemory.printNext(number > 3 ? 1 : 0)
        }
        explain("The background writer lands the 8 files; disk keeps 5, so it evicts 3. flush() waits for it:")
        await cache.flush()
        await heardAboutDisk.printNext(3)
        explain("memoryCount = \(cache.memoryCount), diskCount = \(cache.diskCount)")
        let post1 = cache["post-1"]
        explain("cache[\"post-1\"] → \(post1?.title ?? "nil") (evicted from both levels)")
        explain("cache[\"post-5\"] is on disk only; reading it copies it back into memory, which evicts another:")
        let post5 = cache["post-5"]
        await heardAboutMemory.printNext(1)
        explain(
            "cache[\"post-5\"] → \(post5?.title ?? "nil"); memoryCount = \(cache.memoryCount), diskCount = \(cache.diskCount)"
        )
        explain("removeAll() empties both levels, and announces both clears:")
        cache.removeAll()
        await heardAboutMemory.printNext(1)
        await heardAboutDisk.printNext(1)
        explain("memoryCount = \(cache.memoryCount), diskCount = \(cache.diskCount)")
        await cache.flush()  // nothing left to write once the scratch folder goes
        withExtendedLifetime(delegate) {}
    }
}
