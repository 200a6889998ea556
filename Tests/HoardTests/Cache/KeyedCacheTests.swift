import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// `Cache.keyed(_:)`: the cache's API over domain keys, on both levels.
@Suite(.validatesCacheInvariants) struct KeyedCacheTests {
    struct UserID: Hashable, Sendable {
        let rawValue: Int
    }

    @Test(arguments: [true, false])
    func everyCallReachesTheSameCacheUnderTheMappedKey(memoryOn: Bool) async throws {
        let folder = TemporaryDirectory()
        let fetched = Protected<[String]>([])
        let cache = try folder.stringBuilder().maxRamCount(memoryOn ? 10 : 0).fetcher { key in
            fetched.withLock { $0.append(key) }
            return "fetched \(key)"
        }.build()
        let byID = cache.keyed { (id: UserID) in "user-\(id.rawValue)" }
        let ada = UserID(rawValue: 1)
        byID[ada] = "Ada"
        #expect(byID[ada] == "Ada")
        #expect(cache["user-1"] == "Ada")
        #expect(byID.value(forKey: ada) == "Ada")
        #expect(byID.contains(ada))
        #expect(byID.entry(forKey: ada)?.value == "Ada")
        byID.set("Grace", forKey: UserID(rawValue: 2), expiry: .seconds(60))
        #expect(cache.entry(forKey: "user-2")?.expiresAt != nil)
        byID.removeValue(forKey: ada)
        #expect(!byID.contains(ada))
        #expect(cache["user-1"] == nil)
        byID[UserID(rawValue: 2)] = nil
        #expect(cache["user-2"] == nil)

        #expect(try await byID.getOrFetch(forKey: UserID(rawValue: 3)) == "fetched user-3")
        #expect(try await byID.get(UserID(rawValue: 3)) == "fetched user-3")
        let blocking = await onPlainThread { try? byID.getOrFetchAndWait(forKey: UserID(rawValue: 4)) }
        #expect(blocking == "fetched user-4")
        let viaCallback = await withCheckedContinuation { continuation in
            byID.asyncGet(forKey: UserID(rawValue: 5)) { continuation.resume(returning: try? $0.get()) }
        }
        #expect(viaCallback == "fetched user-5")
        #expect(fetched.withLock { $0 } == ["user-3", "user-4", "user-5"])

        await cache.flush()
        let reopened = try folder.stringBuilder().build(sharingStore: false)
        #expect(reopened["user-3"] == "fetched user-3")
        // The caches check their files when released: keep the folder until then.
        withExtendedLifetime((reopened, cache)) {}
        withExtendedLifetime(folder) {}
    }

    @Test func theViewIsALevelThatComposes() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().build()
        let byID = cache.keyed { (id: UserID) in "u\(id.rawValue)" }
        let front = MemoryCacheLevel<UserID, String>(capacity: 10)
        let levels = front.compose(byID)
        byID.set("Ada", forKey: UserID(rawValue: 1))
        #expect(try await levels.get(UserID(rawValue: 1)) == "Ada")
        #expect(try await front.get(UserID(rawValue: 1)) == "Ada")
        await byID.clear()
        #expect(cache["u1"] == nil)
    }
}

/// A keyed view saves durably too.
@Suite struct KeyedCacheSaveTests {
    @Test func aKeyedSaveReturnsWithTheValueOnDisk() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().build()
        let byNumber = cache.keyed { (number: Int) in "n\(number)" }
        try await byNumber.save("one", forKey: 1)
        try await byNumber.save("two", forKey: 2, expiry: .seconds(60))
        let blocking = await onPlainThread { Result { try byNumber.saveAndWait("three", forKey: 3) } }
        #expect((try? blocking.get()) != nil)
        #expect(Set(folder.entryFiles()) == Set(["n1", "n2", "n3"].map { DiskKey($0).fileName }))
        withExtendedLifetime((cache, folder)) {}
    }
}
