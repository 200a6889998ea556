import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// A delegate whose disk-eviction method misses the requirement's name: it compiles, as an unrelated
/// method, and the default implementation runs instead.
private final class MisnamedDiskEvictionDelegate: CacheDelegate {
    let heard = Protected<[String]>([])
    func cache(_ cache: Cache<String>, willEvictFromDisk value: String, forKey key: String) {
        heard.withLock { $0.append(key) }
    }
    func cache(_ cache: Cache<String>, willEvictFromMemory value: String, forKey key: String) {}
}

/// Logs only through the main-actor protocol's defaults.
@MainActor
private final class SilentMainActorDelegate: MainActorCacheDelegate {
    typealias Value = String
}

/// The default delegate methods tell the logger that they ran, so that a misnamed method is noticed.
@Suite struct DelegateDefaultsTests {
    init() { TestLog.install() }

    @Test func aDefaultThatRunsInsteadOfAMisnamedMethodIsLoggedOncePerTypeAndMethod() async throws {
        let folder = TemporaryDirectory()
        let delegate = MisnamedDiskEvictionDelegate()
        let cache = try folder.stringBuilder().maxRamCount(1).maxDiskCount(1).delegate(delegate).build()
        for key in ["a", "b", "c"] { cache[key] = key }
        await cache.flush()
        #expect(cache.diskCount == 1)
        #expect(delegate.heard.withLock { $0 }.isEmpty, "the misnamed method is never called")
        let type = String(reflecting: MisnamedDiskEvictionDelegate.self)
        let logged = TestLog.messages(containing: "delegate \(type) ")
        let method = "cache(_:willEvictFromDiskForKey:)"
        let expected =
            "delegate \(type) does not implement \(method): the default implementation ran, which does nothing"
        #expect(logged.map(\.message) == [expected])
        #expect(logged.allSatisfy { $0.level == .debug })
        // Implemented methods log nothing, whatever they are told.
        #expect(!logged.contains { $0.message.contains("willEvictFromMemory") })
    }

    @Test func aMainActorDelegatesDefaultsAreLoggedToo() async throws {
        let folder = TemporaryDirectory()
        let delegate = SilentMainActorDelegate()
        let cache = try folder.stringBuilder().maxRamCount(1).build()
        await delegate.cacheWillClearMemory(cache)
        await delegate.cacheWillClearMemory(cache)
        let type = String(reflecting: SilentMainActorDelegate.self)
        let expected = "delegate \(type) does not implement cacheWillClearMemory(_:): the default implementation ran"
        #expect(TestLog.messages(containing: "delegate \(type) ").map(\.message) == [expected + ", which does nothing"])
    }
}
