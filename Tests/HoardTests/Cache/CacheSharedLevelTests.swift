import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// A cache over a shared level: memory → disk → shared → fetcher, writes reaching every level.
@Suite(.validatesCacheInvariants) struct CacheSharedLevelTests {
    private func builder(
        _ folder: TemporaryDirectory,
        _ container: String,
        shared: FakeSharedLevel,
        fetches: Counter? = nil
    ) -> CacheBuilder<String> {
        let builder = folder.stringBuilder(container).sharedLevel(shared)
        guard let fetches else { return builder }
        return builder.fetcher { key in
            _ = fetches.increment()
            return "fetched \(key)"
        }
    }

    @Test func aValueOneInstanceSetIsASharedHitForAnotherWhichFillsItsLevels() async throws {
        let folder = TemporaryDirectory()
        let shared = FakeSharedLevel()
        let first = try builder(folder, "a", shared: shared).build()
        first["k"] = "from the first"
        await first.flush()
        #expect(shared.values["k"] != nil)

        let fetches = Counter()
        let second = try builder(folder, "b", shared: shared, fetches: fetches).build()
        let events = second.events
        #expect(try await second.getOrFetch(forKey: "k") == "from the first")
        #expect(fetches.value == 0)
        #expect(second.statistics.sharedHits == 1)
        #expect(second.statistics.misses == 1)  // memory and disk missed
        second.removeValue(forKey: "end")
        let seen = await events.collect(through: { $0 == .removed(key: "end") })
        #expect(seen.contains(.hit(key: "k", level: .shared)))
        #expect(!seen.contains(.set(key: "k", value: "from the first")))  // a fill, not a set
        // Filled: memory now, and disk.
        #expect(second["k"] == "from the first")
        await second.flush()
        #expect(folder.entryFiles(in: "b") == [DiskKey("k").fileName])
        #expect(shared.gets == 1)
    }

    @Test func aFetchedValueReachesEveryLevelAndARemovalAndAClearReachTheSharedLevel() async throws {
        let folder = TemporaryDirectory()
        let shared = FakeSharedLevel()
        let fetches = Counter()
        let cache = try builder(folder, "a", shared: shared, fetches: fetches).build()
        #expect(try await cache.getOrFetch(forKey: "k") == "fetched k")
        await cache.flush()
        #expect(shared.values["k"] != nil)
        #expect(folder.entryFiles(in: "a").count == 1)
        #expect(cache.statistics.sharedMisses == 1)
        cache.removeValue(forKey: "k")
        await cache.flush()
        #expect(shared.values["k"] == nil)
        cache["x"] = "1"
        cache.removeAll()
        cache["after"] = "2"  // queued after the clear: it survives it
        await cache.flush()
        #expect(shared.clears == 1)
        #expect(Set(shared.values.keys) == ["after"])
    }

    @Test func theSharedLevelCarriesTheExpiryAndAnExpiredValueIsAMiss() async throws {
        let folder = TemporaryDirectory()
        let clock = ManualClock()
        let shared = FakeSharedLevel()
        let writer = try builder(folder, "a", shared: shared).clock(clock.read).build()
        // An hour: a loaded run may take minutes between the write and the check of what is left.
        writer.set("soon gone", forKey: "k", expiry: .seconds(3_600))
        await writer.flush()
        // The level gets the date of the host's clock that is as far away: what it measures from.
        let left = try #require(shared.values["k"]?.expiresAt).timeIntervalSinceNow
        #expect(left > 0 && left <= 3_600)
        let fetches = Counter()
        let reader = try builder(folder, "b", shared: shared, fetches: fetches).clock(clock.read).build()
        clock.advance(by: 3_600)
        #expect(try await reader.getOrFetch(forKey: "k") == "fetched k")
        #expect(fetches.value == 1)
        #expect(reader.statistics.sharedMisses == 1)
    }

    @Test func aForeignOrDamagedValueIsAMiss() async throws {
        let folder = TemporaryDirectory()
        let shared = FakeSharedLevel()
        shared.plant(Data("not an entry".utf8), forKey: "garbage")
        shared.plant(
            Data(EntryFormat.encode(key: "other", payload: Data("v".utf8), schemaVersion: 0, expiresAt: .never)),
            forKey: "foreign"
        )
        shared.plant(
            Data(EntryFormat.encode(key: "old", payload: Data("v".utf8), schemaVersion: 7, expiresAt: .never)),
            forKey: "old"
        )
        var flipped = EntryFormat.encode(
            key: "flipped",
            payload: Data("value".utf8),
            schemaVersion: 0,
            expiresAt: .never
        )
        flipped[flipped.count - 6] ^= 1
        shared.plant(Data(flipped), forKey: "flipped")
        let fetches = Counter()
        let cache = try builder(folder, "a", shared: shared, fetches: fetches).build()
        for key in ["garbage", "foreign", "old", "flipped"] {
            #expect(try await cache.getOrFetch(forKey: key) == "fetched \(key)")
        }
        #expect(fetches.value == 4)
        #expect(cache.statistics.sharedHits == 0)
        #expect(cache.statistics.sharedMisses == 4)
    }

    @Test func aFailingSharedLevelIsAMissTheFetcherServesAndItIsCounted() async throws {
        let folder = TemporaryDirectory()
        let shared = FakeSharedLevel()
        shared.setFailing(true)
        let fetches = Counter()
        let cache = try builder(folder, "a", shared: shared, fetches: fetches).build()
        let events = cache.events
        #expect(try await cache.getOrFetch(forKey: "k") == "fetched k")
        await cache.flush()  // the write of the fetched value fails too
        #expect(cache.statistics.sharedErrors == 2)
        #expect(cache["k"] == "fetched k")
        cache.removeValue(forKey: "end")
        let seen = await events.collect(through: { $0 == .removed(key: "end") })
        #expect(seen.contains { $0.kind == .sharedFailure && $0.key == "k" })
        await #expect(throws: CacheError.io) { try await cache.save("v", forKey: "saved") }
        shared.setFailing(false)
        try await cache.save("v", forKey: "saved")
        #expect(shared.values["saved"] != nil)
    }

    @Test func concurrentMissesShareOneSharedReadAndOneFetch() async throws {
        let folder = TemporaryDirectory()
        let shared = FakeSharedLevel()
        let fetches = Counter()
        let gate = ThreadGate()
        let cache = try folder.stringBuilder().sharedLevel(shared).fetcher { key in
            _ = fetches.increment()
            await onPlainThread { gate.wait() }
            return "fetched \(key)"
        }.build()
        let values = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<20 { group.addTask { try await cache.getOrFetch(forKey: "k") } }
            #expect(await waitUntil { cache.flights.waiterCount(forKey: "k") == 20 })
            gate.open()
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(values == Array(repeating: "fetched k", count: 20))
        #expect(fetches.value == 1)
        #expect(shared.gets == 1)
    }

    @Test func sharedWritesOfOneKeyLandInOrderAndFlushWaitsForThem() async throws {
        let folder = TemporaryDirectory()
        let shared = FakeSharedLevel()
        let cache = try builder(folder, "a", shared: shared).build()
        for round in 0..<200 { cache["k\(round % 5)"] = "v\(round)" }
        await cache.flush()
        for slot in 0..<5 {
            let entry = try EntryFormat.decode([UInt8](try #require(shared.values["k\(slot)"]).bytes))
            #expect(String(decoding: entry.payload, as: UTF8.self) == "v\(195 + slot)")
        }
    }

    @Test func aSaveReturnsOnceTheSharedLevelHasTheValue() async throws {
        let folder = TemporaryDirectory()
        let shared = FakeSharedLevel()
        let cache = try builder(folder, "a", shared: shared).build()
        try await cache.save("durable", forKey: "k")
        let entry = try EntryFormat.decode([UInt8](try #require(shared.values["k"]).bytes))
        #expect(String(decoding: entry.payload, as: UTF8.self) == "durable")
        #expect(folder.entryFiles(in: "a") == [DiskKey("k").fileName])
        // A memory-only cache over a shared level saves to the shared level.
        let memoryOnly = try folder.stringBuilder("m").maxDiskCount(0).sharedLevel(shared).build()
        try await memoryOnly.save("shared only", forKey: "m")
        #expect(shared.values["m"] != nil)
    }
}
