import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// `contains` and `allKeys` of a coherent cache whose disk does not serve (tracking not confirmed
/// with the local copies bypassed, a loss of tracking, a disk clear under way): they say what a read
/// would find, not what the files hold.
extension CacheCoherenceTests {
    /// A plain cache on the same container, which writes entry files the coherent one must not serve.
    func peerWrites(_ folder: TemporaryDirectory, _ values: [String: String]) async throws {
        let peer = try folder.stringBuilder().build()
        for (key, value) in values { peer[key] = value }
        await peer.flush()
    }

    @Test func aCacheWhoseGateIsClosedContainsNoKeyItsDiskHoldsBeforeTracking() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try await coherentCache(folder, level, tracking: false, duringOutage: .bypassLocalCopies)
        try await peerWrites(folder, ["k": "untracked"])
        #expect(folder.entryFiles().count == 1)
        #expect(cache.value(forKey: "k") == nil)
        #expect(cache.entry(forKey: "k") == nil)
        #expect(!cache.contains("k"))
        #expect(cache.allKeys.isEmpty)
        // What a read fetches is the shared level's, whatever the file holds.
        level.store.plant(envelope("k", "shared"), forKey: "k")
        #expect(try await cache.getOrFetch(forKey: "k") == "shared")

        // Once tracking is confirmed, the disk serves again, and the two agree again.
        level.announce(.tracking)
        #expect(await waitUntil { cache.isCoherent })
        try await peerWrites(folder, ["p": "tracked"])
        #expect(cache.contains("p"))
        #expect(cache.allKeys.contains("p"))
        #expect(cache.value(forKey: "p") == "tracked")
    }

    @Test func aCacheThatLostTrackingContainsNoKeyItWouldNotServe() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try await coherentCache(folder, level, duringOutage: .bypassLocalCopies)
        cache["mine"] = "v1"
        await cache.flush()
        #expect(cache.contains("mine"))
        #expect(cache.allKeys == ["mine"])

        level.announce(.all(reason: "the test lost the connection"))
        // From the loss on, through the clear and after it: nothing local is served or listed.
        #expect(!cache.contains("mine"))
        #expect(!cache.allKeys.contains("mine"))
        #expect(await waitUntil { !cache.isClearingDisk })
        // Another process on the container writes while this cache's announcements cannot be
        // trusted: a change of the key at the server meanwhile would go unheard.
        try await peerWrites(folder, ["peer": "unheard"])
        #expect(cache.value(forKey: "peer") == nil)
        #expect(!cache.contains("peer"))
        #expect(cache.allKeys.isEmpty)

        level.announce(.tracking)
        #expect(await waitUntil { cache.isCoherent })
        #expect(cache.contains("peer") == (cache.value(forKey: "peer") != nil))
    }

    @Test func duringALossServingLocalCopiesContainsAgreesWithReadsAndTheReturnHidesThemAtOnce() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try await coherentCache(folder, level)
        cache["k"] = "v1"
        await cache.flush()

        level.announce(.all(reason: "the test lost the connection"))
        // The copies keep serving during the loss: both say so.
        #expect(cache.value(forKey: "k") == "v1")
        #expect(cache.contains("k"))
        #expect(cache.allKeys == ["k"])

        // Back: the kept copies go; until the clear is done, the disk serves nothing, and nothing
        // is listed either (the clear runs on a thread of its own).
        level.announce(.tracking)
        #expect(cache.value(forKey: "k") == nil)
        #expect(!cache.contains("k"))
        #expect(cache.allKeys.isEmpty)
        #expect(await waitUntil { cache.isCoherent })
        #expect(!cache.contains("k"))
    }
}
