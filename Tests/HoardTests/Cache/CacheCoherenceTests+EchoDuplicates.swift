import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// A key whose echo checks wait twice in one read-back: this cache wrote it twice, and each write was
/// announced before the first check read the key back.
extension CacheCoherenceTests {
    @Test func twoOwnWritesOfAKeyCheckedInOneReadBackKeepTheNewerCopy() async throws {
        let folder = TemporaryDirectory()
        let level = FakeBatchReadingLevel()
        let cache = try folder.stringBuilder().sharedLevel(level)
            .coherence(.invalidations(maxLocalAge: .seconds(86_400))).build()
        #expect(await waitUntil { !cache.isClearingDisk })
        level.base.announce(.tracking)
        #expect(await waitUntil { cache.isCoherent })
        try await cache.save("v0", forKey: "k0")
        // "k0"'s read-back is held: the checks announced next wait for one request.
        let held = level.base.holdNextGet()
        level.base.announce(.keys(["k0"]))
        #expect(await waitUntil { level.base.getsStarted == 1 })
        try await cache.save("first", forKey: "k")
        level.base.announce(.keys(["k"]))
        try await cache.save("second", forKey: "k")
        level.base.announce(.keys(["k"]))
        #expect(cache.echoChecksUnderWay == 3)
        held.open()
        #expect(await waitUntil { cache.echoChecksUnderWay == 0 })
        #expect(level.batches == [["k", "k"]])
        // Only this cache wrote "k", and the server holds its last write: the copy of it stays.
        #expect(cache.memory?.value(forKey: "k")?.value == "second")
        await cache.flush()
        #expect(folder.entryFiles().count == 2)
    }

    @Test func anotherInstancesWriteAfterTwoOwnWritesCheckedInOneReadBackDropsTheCopy() async throws {
        let folder = TemporaryDirectory()
        let level = FakeBatchReadingLevel()
        let cache = try folder.stringBuilder().sharedLevel(level)
            .coherence(.invalidations(maxLocalAge: .seconds(86_400))).build()
        #expect(await waitUntil { !cache.isClearingDisk })
        level.base.announce(.tracking)
        #expect(await waitUntil { cache.isCoherent })
        try await cache.save("v0", forKey: "k0")
        let held = level.base.holdNextGet()
        level.base.announce(.keys(["k0"]))
        #expect(await waitUntil { level.base.getsStarted == 1 })
        try await cache.save("first", forKey: "k")
        level.base.announce(.keys(["k"]))
        try await cache.save("second", forKey: "k")
        // Another instance writes right after; the server announces it with the echo, as one.
        level.base.store.plant(envelope("k", "theirs"), forKey: "k")
        level.base.announce(.keys(["k"]))
        held.open()
        #expect(await waitUntil { cache.echoChecksUnderWay == 0 })
        #expect(level.batches == [["k", "k"]])
        #expect(cache.entry(forKey: "k") == nil)
        #expect(try await cache.getOrFetch(forKey: "k") == "theirs")
    }

    @Test func aReadBackThatFindsTheCachesNewerWriteKeepsItsCopyForThatWritesEcho() async throws {
        let folder = TemporaryDirectory()
        let level = FakeBatchReadingLevel()
        let cache = try folder.stringBuilder().sharedLevel(level)
            .coherence(.invalidations(maxLocalAge: .seconds(86_400))).build()
        #expect(await waitUntil { !cache.isClearingDisk })
        level.base.announce(.tracking)
        #expect(await waitUntil { cache.isCoherent })
        try await cache.save("v0", forKey: "k0")
        let held = level.base.holdNextGet()
        level.base.announce(.keys(["k0"]))
        #expect(await waitUntil { level.base.getsStarted == 1 })
        try await cache.save("first", forKey: "k")
        level.base.announce(.keys(["k"]))
        // The next write is made before the first one's check reads the key back; its own echo has
        // not come yet.
        try await cache.save("second", forKey: "k")
        held.open()
        #expect(await waitUntil { cache.echoChecksUnderWay == 0 })
        #expect(cache.memory?.value(forKey: "k")?.value == "second")
        // The newer write's echo: the server still holds it, so the copy stays.
        level.base.announce(.keys(["k"]))
        #expect(await waitUntil { cache.echoChecksUnderWay == 0 })
        #expect(cache.memory?.value(forKey: "k")?.value == "second")
        await cache.flush()
        #expect(folder.entryFiles().count == 2)
        // Another instance's change, afterwards: the copy goes at once.
        level.base.store.plant(envelope("k", "theirs"), forKey: "k")
        level.base.announce(.keys(["k"]))
        #expect(cache.entry(forKey: "k") == nil)
        #expect(try await cache.getOrFetch(forKey: "k") == "theirs")
    }

    /// The server names a key in NFC, whatever spelling the cache wrote it under.
    @Test func twoOwnWritesUnderTwoSpellingsOfAKeyKeepTheNewerCopy() async throws {
        let folder = TemporaryDirectory()
        let level = FakeBatchReadingLevel()
        let cache = try folder.stringBuilder().sharedLevel(level)
            .coherence(.invalidations(maxLocalAge: .seconds(86_400))).build()
        #expect(await waitUntil { !cache.isClearingDisk })
        level.base.announce(.tracking)
        #expect(await waitUntil { cache.isCoherent })
        try await cache.save("v0", forKey: "k0")
        let held = level.base.holdNextGet()
        level.base.announce(.keys(["k0"]))
        #expect(await waitUntil { level.base.getsStarted == 1 })
        try await cache.save("first", forKey: "e\u{301}")
        level.base.announce(.keys(["\u{E9}"]))
        try await cache.save("second", forKey: "\u{E9}")
        level.base.announce(.keys(["\u{E9}"]))
        held.open()
        #expect(await waitUntil { cache.echoChecksUnderWay == 0 })
        #expect(level.batches.map { $0.map { Array($0.utf8) } } == [[Array("\u{E9}".utf8), Array("\u{E9}".utf8)]])
        #expect(cache.memory?.value(forKey: "e\u{301}")?.value == "second")
        await cache.flush()
        #expect(folder.entryFiles().count == 2)
    }
}
