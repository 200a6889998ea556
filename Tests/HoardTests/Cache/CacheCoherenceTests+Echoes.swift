import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// The echo of the cache's own write: it never removes a newer value, while another instance's
/// change, announced with it or during its check, still drops the copy.
extension CacheCoherenceTests {
    @Test func theEchoOfTheCachesOwnWriteNeverRemovesANewerValue() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try await coherentCache(folder, level)
        let held = level.holdNextSet()
        cache.set("v2", forKey: "k")
        #expect(await waitUntil { level.setsStarted == 1 })
        // An invalidation while the write is under way: the local value is newer than the server's.
        level.announce(.keys(["k"]))
        #expect(cache["k"] == "v2")
        held.open()
        await cache.flush()
        // Once the write is made, the deferred invalidation is checked: the server has v2, so the
        // copy stays.
        #expect(await waitUntil { cache.echoChecksUnderWay == 0 && level.getsStarted == 1 })
        #expect(cache.memory?.value(forKey: "k")?.value == "v2")
        // The echo of the same write, after it is made: nothing is left to check, the copy goes.
        level.announce(.keys(["k"]))
        #expect(cache.entry(forKey: "k") == nil)
        #expect(try await cache.getOrFetch(forKey: "k") == "v2")
    }

    @Test func aConfirmedSaveStaysInMemoryAndOnDiskAfterItsEcho() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try await coherentCache(folder, level)
        for index in 0..<20 { try await cache.save("v\(index)", forKey: "k\(index)") }
        await cache.flush()
        level.announce(.keys((0..<20).map { "k\($0)" }))
        #expect(await waitUntil { cache.echoChecksUnderWay == 0 && level.getsStarted == 20 })
        for index in 0..<20 { #expect(cache.memory?.value(forKey: "k\(index)")?.value == "v\(index)") }
        #expect(folder.entryFiles().count == 20)
        #expect(cache.statistics.diskCount == 20)
        // Another instance's write of one of them, afterwards: that copy goes at once.
        level.store.plant(envelope("k3", "theirs"), forKey: "k3")
        level.announce(.keys(["k3"]))
        #expect(cache.entry(forKey: "k3") == nil)
        await cache.flush()
        #expect(folder.entryFiles().count == 19)
        #expect(try await cache.getOrFetch(forKey: "k3") == "theirs")
    }

    @Test func aFillWhileTheCachesOwnWriteIsOnItsWayIsNotKeptSoItsEchoCannotKeepIt() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        // Memory only: a value dropped from memory is read from the shared level again.
        let cache = try folder.stringBuilder().maxDiskCount(0).sharedLevel(level)
            .coherence(.invalidations(maxLocalAge: .seconds(86_400))).build()
        level.announce(.tracking)
        #expect(await waitUntil { cache.isCoherent })
        level.store.plant(envelope("k", "old"), forKey: "k")
        let held = level.holdNextSet()
        cache.set("mine", forKey: "k")
        #expect(await waitUntil { level.setsStarted == 1 })
        // Memory drops the value while its write is on its way: a read waits for the write rather
        // than meet the server's old value.
        cache.clearMemory()
        let waiting = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { cache.flights.waiterCount(forKey: "k") == 1 || level.getsStarted == 1 })
        held.open()
        #expect(try await waiting.value == "mine")
        await cache.flush()
        level.announce(.keys(["k"]))
        #expect(await waitUntil { cache.echoChecksUnderWay == 0 })
        #expect(try await cache.getOrFetch(forKey: "k") == "mine")

        // A read sent before the next write, answered once it has landed: not kept.
        cache.clearMemory()
        let heldGet = level.holdNextGet()
        let gets = level.getsStarted
        let read = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { level.getsStarted == gets + 1 })
        let heldSet = level.holdNextSet()
        cache.set("mine again", forKey: "k")
        #expect(await waitUntil { level.setsStarted == 2 })
        cache.clearMemory()
        heldSet.open()
        await cache.flush()
        heldGet.open()
        #expect(try await read.value == "mine")
        #expect(cache.entry(forKey: "k") == nil)
        level.announce(.keys(["k"]))
        #expect(await waitUntil { cache.echoChecksUnderWay == 0 })
        #expect(try await cache.getOrFetch(forKey: "k") == "mine again")
    }

    @Test func anotherInstancesWriteAnnouncedAsOneWithTheEchoDropsTheCopy() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try await coherentCache(folder, level)
        try await cache.save("mine", forKey: "k")
        // Another instance writes the key right after this one; the server announces both changes
        // as one (Redis merges the changes of a key within one event-loop turn).
        level.store.plant(envelope("k", "theirs"), forKey: "k")
        level.announce(.keys(["k"]))
        #expect(await waitUntil { cache.echoChecksUnderWay == 0 && cache.entry(forKey: "k") == nil })
        await cache.flush()
        #expect(folder.entryFiles().isEmpty)
        #expect(try await cache.getOrFetch(forKey: "k") == "theirs")
    }

    @Test func anInvalidationDuringTheEchoCheckDropsTheCopyAtOnceAndTheCheckNeverRestoresIt() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try await coherentCache(folder, level)
        try await cache.save("mine", forKey: "k")
        let held = level.holdNextGet()
        level.announce(.keys(["k"]))
        #expect(await waitUntil { level.getsStarted == 1 })
        #expect(cache["k"] == "mine")
        // The check's read is held (it saw "mine"); another instance's change is announced meanwhile.
        level.store.plant(envelope("k", "theirs"), forKey: "k")
        level.announce(.keys(["k"]))
        #expect(cache.entry(forKey: "k") == nil)
        held.open()
        #expect(await waitUntil { cache.echoChecksUnderWay == 0 })
        #expect(cache.entry(forKey: "k") == nil)
        #expect(try await cache.getOrFetch(forKey: "k") == "theirs")
    }

    @Test func aLossOfTrackingForgetsTheWritesWhoseEchoesMayStillCome() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try await coherentCache(folder, level)
        try await cache.save("mine", forKey: "k")
        level.announce(.all(reason: "lost"))
        level.announce(.tracking)
        #expect(await waitUntil { !cache.isClearingDisk })
        #expect(try await cache.getOrFetch(forKey: "k") == "mine")
        // The copy was read after the loss: an invalidation of it is never taken for an echo.
        let gets = level.getsStarted
        level.announce(.keys(["k"]))
        #expect(cache.entry(forKey: "k") == nil)
        #expect(cache.echoChecksUnderWay == 0)
        #expect(level.getsStarted == gets)
    }

    @Test func aFailedWriteIsNeverTakenForItsEcho() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try await coherentCache(folder, level)
        level.store.setFailing(true)
        await #expect(throws: CacheError.self) { try await cache.save("mine", forKey: "k") }
        level.store.setFailing(false)
        level.announce(.keys(["k"]))
        #expect(cache.entry(forKey: "k") == nil)
        #expect(cache.echoChecksUnderWay == 0)
    }

    @Test func theEchoOfAnOlderOwnWriteNeverRemovesTheNewerOneBeforeTheServerHasIt() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try await coherentCache(folder, level)
        let first = level.holdNextSet()
        cache.set("v1", forKey: "k")
        #expect(await waitUntil { level.setsStarted == 1 })
        let second = level.holdNextSet()
        cache.set("v2", forKey: "k")
        first.open()
        #expect(await waitUntil { level.setsStarted == 2 })
        // The server has v1 at most; its echo comes while v2 is on its way.
        level.announce(.keys(["k"]))
        #expect(cache["k"] == "v2")
        level.announce(.keys(["k"]))
        #expect(cache["k"] == "v2")
        second.open()
        await cache.flush()
        #expect(try await cache.getOrFetch(forKey: "k") == "v2")
    }
}
