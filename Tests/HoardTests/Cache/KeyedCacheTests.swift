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

/// Two domain keys that map to one string are one key, for a batch built over the view too.
@Suite struct KeyedCacheBatchTests {
    struct UserID: Hashable, Sendable {
        let rawValue: Int
    }

    /// A string serializer whose encoding of `"first"` holds its thread until `isLanded` says the later
    /// value is stored: had both values been set at once, `"first"` would land last.
    struct FirstLandsLastSerializer: CacheSerializer {
        let isLanded: @Sendable () -> Bool

        func serialize(_ value: String) throws -> Data {
            if value == "first" {
                // Spins on its own thread: a serializer is synchronous. The deadline only guards
                // against a hang.
                let deadline = ContinuousClock.now + .seconds(120)
                while !isLanded(), ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.001) }
            }
            return Data(value.utf8)
        }

        func deserialize(_ data: Data) throws -> String { String(decoding: data, as: UTF8.self) }
    }

    @Test func aBatchSetOfTwoDomainKeysOfOneStringKeepsTheLaterValue() async throws {
        let folder = TemporaryDirectory()
        let built = Protected<Cache<String>?>(nil)
        let serializer = FirstLandsLastSerializer { built.withLock { $0 }?.value(forKey: "user") == "second" }
        // The cost limit makes a set serialize before it stores, on the caller's thread.
        let cache = try folder.stringBuilder().serializer(serializer).maxRamCost(1 << 20).build()
        built.withLock { $0 = cache }
        defer { built.withLock { $0 = nil } }
        let everyone = cache.keyed { (_: UserID) in "user" }
        try await everyone.allBatch().set(["first", "second"], forKey: [UserID(rawValue: 1), UserID(rawValue: 2)])
        #expect(cache["user"] == "second")
        #expect(everyone[UserID(rawValue: 1)] == "second")
        await cache.flush()
        withExtendedLifetime(folder) {}
    }
}

/// A keyed view saves durably too.
@Suite struct KeyedCacheSaveTests {
    @Test func aKeyedSaveReturnsWithTheValueOnDisk() async throws {
        let folder = TemporaryDirectory()
        let clock = ManualClock()
        let cache = try folder.stringBuilder().clock(clock.read).build()
        let byNumber = cache.keyed { (number: Int) in "n\(number)" }
        try await byNumber.save("one", forKey: 1)
        try await byNumber.save("two", forKey: 2, expiry: .seconds(60))
        let blocking = await onPlainThread {
            Result {
                try byNumber.saveAndWait("three", forKey: 3)
                try byNumber.saveAndWait("four", forKey: 4, expiry: .seconds(70))
            }
        }
        #expect((try? blocking.get()) != nil)
        let viaCallback = await withCheckedContinuation { continuation in
            byNumber.save("five", forKey: 5) { continuation.resume(returning: $0) }
        }
        #expect((try? viaCallback.get()) != nil)
        let expiringViaCallback = await withCheckedContinuation { continuation in
            byNumber.save("six", forKey: 6, expiry: .seconds(80)) { continuation.resume(returning: $0) }
        }
        #expect((try? expiringViaCallback.get()) != nil)
        #expect(Set(folder.entryFiles()) == Set((1...6).map { DiskKey("n\($0)").fileName }))
        let deadlines = (1...6).map { cache.entry(forKey: "n\($0)")?.expiresAt }
        #expect(deadlines == [nil, 60, nil, 70, nil, 80].map { $0.map { clock.now.addingTimeInterval($0) } })
        withExtendedLifetime((cache, folder)) {}
    }
}
