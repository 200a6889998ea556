import Foundation
import Testing

@testable import Hoard

/// A `@MainActor` type hears a cache's notifications on the main actor, in order.
@Suite(.validatesCacheInvariants) @MainActor struct MainActorDelegateTests {
    @MainActor
    final class Model: MainActorCacheDelegate {
        var heard: [String] = []

        func cache(_ cache: Cache<String>, willEvictFromMemory value: String, forKey key: String) {
            MainActor.assertIsolated()
            heard.append("memory \(key)=\(value)")
        }

        func cacheWillClearMemory(_ cache: Cache<String>) { heard.append("clear memory") }
        func cacheWillClearDisk(_ cache: Cache<String>) { heard.append("clear disk") }
        func cache(_ cache: Cache<String>, willEvictFromDiskForKey key: String) { heard.append("disk \(key)") }

        func cache(_ cache: Cache<String>, didFailToFetchForKey key: String, error: any Error) {
            heard.append("fetch \(key) failed")
        }
    }

    @Test func evictionsClearsAndFailuresArriveOnTheMainActorInOrder() async throws {
        let folder = TemporaryDirectory()
        let model = Model()
        let cache = try folder.stringBuilder().maxRamCount(1).maxDiskCount(1).evictionPolicy(.lru)
            .fetcher { _ in throw CacheError.notFound }
            .mainActorDelegate(model).build()
        cache["a"] = "1"
        cache["b"] = "2"  // evicts a from memory
        await cache.flush()  // the disk keeps one: evicts a from disk
        _ = try? await cache.getOrFetch(forKey: "c")
        cache.removeAll()
        let expected = ["memory a=1", "disk a", "fetch c failed", "clear memory", "clear disk"]
        #expect(await waitUntil { model.heard.count >= expected.count })
        #expect(Set(model.heard) == Set(expected))
        // The disk eviction comes from the background writer, whenever it lands; everything else
        // comes from this task, in the order it happened.
        #expect(model.heard.filter { $0 != "disk a" } == expected.filter { $0 != "disk a" })
    }

    @Test func notificationsFromOneThreadArriveInTheOrderTheyWereMade() async throws {
        let folder = TemporaryDirectory()
        let model = Model()
        let cache = try folder.stringBuilder().build()
        let forwarder = MainActorDelegateForwarder(model)
        await onPlainThread {
            for index in 0..<200 { forwarder.cache(cache, willEvictFromMemory: "v", forKey: "\(index)") }
        }
        #expect(await waitUntil { model.heard.count == 200 })
        #expect(model.heard == (0..<200).map { "memory \($0)=v" })
    }

    @Test func theCacheKeepsTheForwardingAliveAndTheModelWeakly() async throws {
        let folder = TemporaryDirectory()
        weak var released: Model?
        let cache: Cache<String>
        do {
            let model = Model()
            released = model
            cache = try folder.stringBuilder().maxRamCount(1).mainActorDelegate(model).build()
            #expect(cache.delegate != nil)
        }
        #expect(released == nil)
        cache["a"] = "1"
        cache["b"] = "2"  // a notification for a delegate that is gone: nothing happens
        #expect(cache["b"] == "2")
        await cache.flush()
        withExtendedLifetime((cache, folder)) {}
    }

    @Test func settingAMainActorDelegateLaterWorksToo() async throws {
        let folder = TemporaryDirectory()
        let model = Model()
        let cache = try folder.stringBuilder().maxRamCount(1).build()
        cache.setMainActorDelegate(model)
        cache["a"] = "1"
        cache["b"] = "2"
        #expect(await waitUntil { model.heard == ["memory a=1"] })
        cache.setMainActorDelegate(nil)
        #expect(cache.delegate == nil)
    }
}
