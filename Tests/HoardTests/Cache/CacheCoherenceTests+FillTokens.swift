import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Fills checked per key: a fill in flight is rejected by a change of its own key (an invalidation,
/// a set, a write made, a loss of tracking) and by nothing else, however many keys share its stripe.
extension CacheCoherenceTests {
    /// A key other than `key` whose change count (one of `KeyStripes.countCount`, by hash value) is
    /// `key`'s: before fills were checked per key, a change of it rejected `key`'s fills.
    func neighbour(of key: String) throws -> String {
        let count = { (key: String) in UInt(bitPattern: key.hashValue) % UInt(KeyStripes.countCount) }
        return try #require((0..<1_000_000).lazy.map { "neighbour-\($0)" }.first { count($0) == count(key) })
    }

    @Test func anInvalidationOfAnotherKeyDoesNotRejectAFillInFlight() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try await coherentCache(folder, level)
        let other = try neighbour(of: "k")
        level.store.plant(envelope("k", "v"), forKey: "k")
        let held = level.holdNextGet()
        let read = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { level.getsStarted == 1 })
        // Another instance writes a key sharing the change count of `k`, and one it never held.
        level.announce(.keys([other, "never held"]))
        held.open()
        #expect(try await read.value == "v")
        #expect(cache.memory?.value(forKey: "k")?.value == "v")
        #expect(cache.engine.stripes.fillsInFlight == 0)
    }

    @Test func anInvalidationOfTheKeyStillRejectsItsFillWhenOtherKeysChangeToo() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try await coherentCache(folder, level)
        let other = try neighbour(of: "k")
        level.store.plant(envelope("k", "old"), forKey: "k")
        let held = level.holdNextGet()
        let read = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { level.getsStarted == 1 })
        level.announce(.keys([other]))
        level.store.plant(envelope("k", "new"), forKey: "k")
        level.announce(.keys(["k"]))
        level.announce(.keys([other]))
        held.open()
        #expect(try await read.value == "old")
        await cache.flush()
        #expect(cache.entry(forKey: "k") == nil)
        #expect(try await cache.getOrFetch(forKey: "k") == "new")
        #expect(cache.memory?.value(forKey: "k")?.value == "new")
    }

    @Test func theCachesOwnWriteOfAnotherKeyAndItsEchoDoNotRejectAFill() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try await coherentCache(folder, level)
        let other = try neighbour(of: "k")
        level.store.plant(envelope("k", "v"), forKey: "k")
        let held = level.holdNextGet()
        let read = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { level.getsStarted == 1 })
        // A set of the neighbour, its write made, and its echo checked, all while `k`'s read is held.
        try await cache.save("mine", forKey: other)
        level.announce(.keys([other]))
        #expect(await waitUntil { cache.echoChecksUnderWay == 0 && level.getsStarted == 2 })
        held.open()
        #expect(try await read.value == "v")
        #expect(cache.memory?.value(forKey: "k")?.value == "v")
        #expect(cache.memory?.value(forKey: other)?.value == "mine")
    }

    @Test func aSetOfTheKeyDuringItsFillStillWins() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try await coherentCache(folder, level)
        level.store.plant(envelope("k", "old"), forKey: "k")
        let held = level.holdNextGet()
        let read = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { level.getsStarted == 1 })
        try await cache.save("mine", forKey: "k")
        held.open()
        _ = try await read.value
        await cache.flush()
        #expect(cache.memory?.value(forKey: "k")?.value == "mine")
        #expect(try await cache.getOrFetch(forKey: "k") == "mine")
    }

    @Test func aLossOfTrackingDuringAFillStillRejectsIt() async throws {
        for outage in [CacheCoherence.Outage.serveLocalCopies, .bypassLocalCopies] {
            let folder = TemporaryDirectory()
            let level = FakeInvalidatingLevel()
            let cache = try await coherentCache(folder, level, duringOutage: outage)
            level.store.plant(envelope("k", "old"), forKey: "k")
            let held = level.holdNextGet()
            let read = Task { try await cache.getOrFetch(forKey: "k") }
            #expect(await waitUntil { level.getsStarted == 1 })
            level.announce(.all(reason: "lost"))
            level.store.plant(envelope("k", "changed during the loss"), forKey: "k")
            level.announce(.tracking)
            #expect(await waitUntil { cache.isCoherent && !cache.isClearingDisk })
            held.open()
            #expect(try await read.value == "old")
            await cache.flush()
            #expect(cache.entry(forKey: "k") == nil)
            #expect(try await cache.getOrFetch(forKey: "k") == "changed during the loss")
        }
    }

    @Test func aFetchedValueIsKeptDespiteAnotherKeysChangeButNotDespiteItsOwn() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let fetching = [Gate(), Gate()]
        let calls = Counter()
        let cache = try await coherentCache(folder, level) { key in
            try await fetching[min(calls.increment(), 2) - 1].wait()
            return "fetched \(key)"
        }
        let other = try neighbour(of: "k")
        let fetch = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { calls.value == 1 })
        level.announce(.keys([other]))
        fetching[0].open()
        #expect(try await fetch.value == "fetched k")
        #expect(cache.memory?.value(forKey: "k")?.value == "fetched k")

        // Another instance writes the key itself while this one fetches it: the fetched value goes.
        let again = Task { try await cache.getOrFetch(forKey: other) }
        #expect(await waitUntil { calls.value == 2 })
        level.announce(.keys([other]))
        fetching[1].open()
        #expect(try await again.value == "fetched \(other)")
        #expect(cache.memory?.value(forKey: other) == nil)
        #expect(cache.memory?.value(forKey: "k")?.value == "fetched k")
    }

    @Test func fillsThatFailOrAreCancelledLeaveNoTrackingBehind() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let fetching = Gate()
        let cache = try await coherentCache(folder, level) { key in
            if key == "fails" { throw CacheError.notFound(key: key) }
            try await fetching.wait()
            return key
        }
        await #expect(throws: CacheError.self) { try await cache.getOrFetch(forKey: "fails") }
        let cancelled = Task { try await cache.getOrFetch(forKey: "cancelled") }
        #expect(await waitUntil { cache.engine.stripes.fillsInFlight == 1 })
        cancelled.cancel()
        _ = await cancelled.result
        // The shared fetch may outlive its cancelled caller: it ends once the fetcher returns.
        fetching.open()
        #expect(await waitUntil { cache.engine.stripes.fillsInFlight == 0 })
    }

    @Test func eachFillOfAKeyIsTrackedUntilItEnds() {
        let stripes = KeyStripes()
        let hash = "k".hashValue
        let neighbour = hash &+ KeyStripes.countCount
        let first = stripes.beginFill(hash)
        let second = stripes.beginFill(hash)
        stripes.change(neighbour) {}
        #expect(stripes.ifUnchanged(since: first) { true }.result == true)
        stripes.endFill(first)
        #expect(stripes.fillsInFlight == 1)
        stripes.change(hash) {}
        #expect(stripes.ifUnchanged(since: second) { true }.result == nil)
        stripes.endFill(second)
        #expect(stripes.fillsInFlight == 0)
        // A fill begun after the change is not rejected by it; a clear rejects every fill.
        let third = stripes.beginFill(hash)
        #expect(stripes.ifUnchanged(since: third) { true }.result == true)
        stripes.changeAll {}
        #expect(stripes.ifUnchanged(since: third) { true }.result == nil)
        stripes.endFill(third)
        #expect(stripes.fillsInFlight == 0)
    }
}
