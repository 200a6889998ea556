import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// `coherence(_:)` against a shared level the test drives: which events drop which local copies, a
/// fill racing an invalidation, the closed gate after a loss, the echo of the cache's own write, and
/// the maximum local age.
struct CacheCoherenceTests {
    /// The bytes another instance would have stored for `value`.
    func envelope(_ key: String, _ value: String) -> Data {
        Data(EntryFormat.encode(key: key, payload: Data(value.utf8), schemaVersion: 0, expiresAt: .never))
    }

    func coherentCache(
        _ folder: TemporaryDirectory,
        _ level: FakeInvalidatingLevel,
        tracking: Bool = true,
        duringOutage: CacheCoherence.Outage = .serveLocalCopies,
        fetcher: (@Sendable (String) async throws -> String)? = nil
    ) async throws -> Cache<String> {
        // A day, not the default minute: a test of a loaded run can stall for more than a minute
        // between its fill and its last read, and a local copy past its age is (rightly) a miss.
        var builder = folder.stringBuilder().sharedLevel(level)
            .coherence(.invalidations(maxLocalAge: .seconds(86_400), duringOutage: duringOutage))
        if let fetcher { builder = builder.fetcher(fetcher) }
        let cache = try builder.build()
        // `build()` empties the disk (what it holds was not tracked) on a thread of its own: a fill
        // written before that clear runs would be removed by it.
        #expect(await waitUntil { !cache.isClearingDisk })
        if tracking {
            // Built before tracking was confirmed, the cache kept what it stored meanwhile: the
            // confirmation drops it, and the gate opens once that disk clear is done.
            level.announce(.tracking)
            #expect(await waitUntil { cache.isCoherent })
        }
        return cache
    }

    @Test func invalidationsNeedASharedLevelThatAnnouncesChanges() throws {
        let folder = TemporaryDirectory()
        let plain = folder.stringBuilder().sharedLevel(FakeSharedLevel())
        let noAnnouncements = #expect(throws: CacheError.self) { try plain.coherence(.invalidations).build() }
        #expect(noAnnouncements?.code == .invalidConfiguration)
        #expect(noAnnouncements?.message.contains("ttlOnly") == true)
        let noShared = #expect(throws: CacheError.self) {
            try folder.stringBuilder("b").coherence(.ttlOnly(maxAge: .seconds(5))).build()
        }
        #expect(noShared?.code == .invalidConfiguration)
        let zeroAge = #expect(throws: CacheError.self) { try plain.coherence(.ttlOnly(maxAge: .zero)).build() }
        #expect(zeroAge?.code == .invalidConfiguration)
        let cache = try plain.coherence(.ttlOnly(maxAge: .seconds(86_400))).build()
        cache["k"] = "v"
        #expect(cache["k"] == "v")
    }

    /// A level made from one that announces changes (here by mapping its keys) is a plain level: it
    /// announces nothing, and `build()` says so rather than build a cache that never hears of a change.
    @Test func aLevelMadeFromAnAnnouncingLevelIsRefusedForInvalidations() throws {
        let folder = TemporaryDirectory()
        let mapped = FakeInvalidatingLevel().transformKeys { (key: String) in "users:" + key }
        let refused = #expect(throws: CacheError.self) {
            try folder.stringBuilder().sharedLevel(mapped).coherence(.invalidations).build()
        }
        #expect(refused?.code == .invalidConfiguration)
        #expect(refused?.message.contains("announces changes") == true)
    }

    @Test func aLevelThatCannotTrackMakesBuildThrowAndNamesTheFallback() throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        level.refuse("the server does not speak RESP3.")
        let error = #expect(throws: CacheError.self) {
            try folder.stringBuilder().sharedLevel(level).coherence(.invalidations).build()
        }
        #expect(error?.code == .invalidConfiguration)
        #expect(error?.message.contains("RESP3") == true)
        #expect(error?.message.contains(".ttlOnly(maxAge:)") == true)
        _ = try folder.stringBuilder("b").sharedLevel(level).coherence(.ttlOnly(maxAge: .seconds(30))).build()
    }

    @Test func aBuildThatCannotTrackHasClearedTheDiskBeforeItThrows() async throws {
        let folder = TemporaryDirectory()
        let plain = try folder.stringBuilder().build()
        plain["old"] = "untracked"
        await plain.flush()
        #expect(folder.entryFiles().count == 1)
        let level = FakeInvalidatingLevel()
        level.refuse("the server does not speak RESP3.")
        #expect(throws: CacheError.self) {
            try folder.stringBuilder().sharedLevel(level).coherence(.invalidations).build()
        }
        // The clear that the failed build began is over: it cannot remove what is written next.
        #expect(folder.entryFiles().isEmpty)
        plain["new"] = "kept"
        await plain.flush()
        #expect(plain["new"] == "kept")
        #expect(folder.entryFiles().count == 1)
    }

    @Test func anInvalidationDropsTheKeyFromMemoryAndDisk() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try await coherentCache(folder, level)
        level.store.plant(envelope("k", "old"), forKey: "k")
        #expect(try await cache.getOrFetch(forKey: "k") == "old")
        await cache.flush()
        #expect(cache.entry(forKey: "k")?.level == .memory)
        level.store.plant(envelope("k", "new"), forKey: "k")
        level.announce(.keys(["k", "some other key"]))
        #expect(cache.entry(forKey: "k") == nil)
        await cache.flush()
        #expect(folder.entryFiles().isEmpty)
        #expect(try await cache.getOrFetch(forKey: "k") == "new")
        #expect(cache["k"] == "new")
    }

    @Test func aFillWhoseReadRacedAnInvalidationIsNotInstalled() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try await coherentCache(folder, level)
        level.store.plant(envelope("k", "old"), forKey: "k")
        let held = level.holdNextGet()
        let read = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { level.getsStarted == 1 })
        // Another instance writes while the read's answer (the old value) is on its way.
        level.store.plant(envelope("k", "new"), forKey: "k")
        level.announce(.keys(["k"]))
        held.open()
        // The read began before the write: it may return the old value, but must not keep it.
        #expect(try await read.value == "old")
        await cache.flush()
        #expect(cache.entry(forKey: "k") == nil)
        #expect(try await cache.getOrFetch(forKey: "k") == "new")
        #expect(cache.entry(forKey: "k")?.value == "new")
    }

    @Test func nothingIsStoredLocallyBeforeTrackingIsConfirmedNorBetweenALossAndTheNext() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try await coherentCache(folder, level, tracking: false, duringOutage: .bypassLocalCopies)
        level.store.plant(envelope("k", "v1"), forKey: "k")
        #expect(try await cache.getOrFetch(forKey: "k") == "v1")
        #expect(cache.entry(forKey: "k") == nil)
        cache.set("mine", forKey: "m")
        await cache.flush()
        #expect(cache.entry(forKey: "m") == nil)
        #expect(level.store.values["m"] != nil)

        level.announce(.tracking)
        #expect(try await cache.getOrFetch(forKey: "k") == "v1")
        #expect(try await cache.getOrFetch(forKey: "m") == "mine")
        await cache.flush()
        #expect(cache.entry(forKey: "k")?.value == "v1")
        #expect(!folder.entryFiles().isEmpty)

        level.announce(.all(reason: "the test lost the connection"))
        #expect(cache.entry(forKey: "k") == nil)
        #expect(cache.entry(forKey: "m") == nil)
        #expect(try await cache.getOrFetch(forKey: "k") == "v1")
        await cache.flush()
        #expect(cache.entry(forKey: "k") == nil)
        // The disk is cleared on a thread of its own; until that clear is over (after its last
        // file is gone), nothing is stored locally.
        #expect(await waitUntil { folder.entryFiles().isEmpty && !cache.isClearingDisk })

        level.announce(.tracking)
        #expect(try await cache.getOrFetch(forKey: "k") == "v1")
        #expect(cache.entry(forKey: "k")?.value == "v1")
    }

    @Test func duringALossTheLocalCopiesKeepServingAndGoOnceTrackingIsBack() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let fetches = Protected(0)
        let cache = try await coherentCache(folder, level) { key in
            fetches.withLock { $0 += 1 }
            return "origin \(key)"
        }
        level.store.plant(envelope("k", "v1"), forKey: "k")
        #expect(try await cache.getOrFetch(forKey: "k") == "v1")
        await cache.flush()
        #expect(folder.entryFiles().count == 1)

        // Tracking is lost and the server is down.
        let flushes = cache.statistics.coherenceFlushes
        level.store.setFailing(true)
        level.announce(.all(reason: "the test lost the connection"))
        #expect(!cache.isCoherent)
        let gets = level.getsStarted
        for _ in 0..<20 { #expect(try await cache.getOrFetch(forKey: "k") == "v1") }
        #expect(cache["k"] == "v1")
        #expect(level.getsStarted == gets)
        // A key read for the first time meanwhile is fetched once, then served locally.
        for _ in 0..<20 { #expect(try await cache.getOrFetch(forKey: "new") == "origin new") }
        #expect(fetches.withLock { $0 } == 1)
        #expect(cache.statistics.coherenceFlushes == flushes)

        // Back: a change may have gone unannounced, so every copy kept goes; the gate opens once
        // the disk is cleared.
        level.store.setFailing(false)
        level.store.plant(envelope("k", "v2"), forKey: "k")
        level.announce(.tracking)
        #expect(cache.entry(forKey: "k") == nil)
        #expect(cache.entry(forKey: "new") == nil)
        #expect(cache.statistics.coherenceFlushes == flushes + 1)
        #expect(try await cache.getOrFetch(forKey: "k") == "v2")
        #expect(await waitUntil { cache.isCoherent })
        await cache.flush()
        // The clear removed both old copies. The read above may still have filled in "k" with v2
        // once the gate opened (when the clear finished before that read's fill): that copy is
        // current, so the disk holds nothing or v2.
        cache.clearMemory()
        #expect(folder.entryFiles().count <= 1)
        #expect(cache.entry(forKey: "new") == nil)
        #expect([nil, "v2"].contains(cache.entry(forKey: "k")?.value))
        #expect(try await cache.getOrFetch(forKey: "k") == "v2")
        await cache.flush()
        #expect(cache.entry(forKey: "k")?.value == "v2")
        #expect(cache.entry(forKey: "new") == nil)
    }

    @Test func aFillInFlightAcrossALossAndARecoveryIsNotInstalled() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try await coherentCache(folder, level)
        level.store.plant(envelope("k", "old"), forKey: "k")
        let held = level.holdNextGet()
        let read = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { level.getsStarted == 1 })
        // Tracking is lost and comes back while the read is out: a change made meanwhile went unannounced.
        level.announce(.all(reason: "lost"))
        level.announce(.tracking)
        held.open()
        #expect(try await read.value == "old")
        #expect(cache.entry(forKey: "k") == nil)
    }

    @Test func aLocalCopyLivesAtMostTheMaximumLocalAgeAndTheSharedLevelKeepsItsOwnExpiry() async throws {
        let folder = TemporaryDirectory()
        let clock = ManualClock(Date())
        let level = FakeSharedLevel()
        let cache = try folder.stringBuilder().sharedLevel(level).clock(clock.read)
            .coherence(.ttlOnly(maxAge: .seconds(10))).build()
        cache.set("v", forKey: "k")
        await cache.flush()
        #expect(level.values["k"]?.expiresAt == nil)
        clock.advance(by: 9)
        #expect(cache["k"] == "v")
        clock.advance(by: 2)
        #expect(cache["k"] == nil)
        #expect(try await cache.getOrFetch(forKey: "k") == "v")
        #expect(level.gets == 1)
    }

    @Test func aReadBegunWhileTheGateIsClosedAndAnsweredAfterTrackingIsNotInstalled() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try await coherentCache(folder, level, tracking: false)
        level.store.plant(envelope("k", "old"), forKey: "k")
        let held = level.holdNextGet()
        let read = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { level.getsStarted == 1 })
        // Changes made before tracking was confirmed went unannounced: the answer may be stale.
        level.announce(.tracking)
        held.open()
        #expect(try await read.value == "old")
        await cache.flush()
        #expect(cache.entry(forKey: "k") == nil)
        #expect(folder.entryFiles().isEmpty)
    }

    @Test func aReplyThatComesBeforeTheInvalidationIsInstalledThenDropped() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try await coherentCache(folder, level)
        level.store.plant(envelope("k", "old"), forKey: "k")
        let held = level.holdNextGet()
        let read = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { level.getsStarted == 1 })
        // The server changes the key; the read's answer (the old value) comes before the push.
        level.store.plant(envelope("k", "new"), forKey: "k")
        held.open()
        #expect(try await read.value == "old")
        #expect(cache.entry(forKey: "k")?.value == "old")
        level.announce(.keys(["k"]))
        #expect(cache.entry(forKey: "k") == nil)
        await cache.flush()
        #expect(folder.entryFiles().isEmpty)
        #expect(try await cache.getOrFetch(forKey: "k") == "new")
    }

    @Test func aDiskCopyIsNotServedWhileTheGateIsClosedNorUntilItsClearIsDone() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try await coherentCache(folder, level)
        level.store.plant(envelope("k", "v"), forKey: "k")
        #expect(try await cache.getOrFetch(forKey: "k") == "v")
        await cache.flush()
        #expect(!folder.entryFiles().isEmpty)
        // Closed, its disk not cleared yet: the entry file is still there, and serves nothing.
        cache.engine.setCoherent(false, clearsDisk: true)
        #expect(!folder.entryFiles().isEmpty)
        #expect(cache["k"] == nil)
        #expect(cache.entry(forKey: "k") == nil)
        // Open again before the clear is done: the disk still serves nothing.
        cache.engine.setCoherent(true)
        #expect(cache["k"] == nil)
        cache.engine.didClearDisk()
        #expect(cache["k"] == "v")
    }
}
