import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Where `removeAll()` meets a fetch or a shared read under way: "a set or removal made while the
/// shared level or the fetcher answers wins over what they return", with a memory level or without.
@Suite(.timeLimit(.minutes(10)), .validatesCacheInvariants)
struct ClearFillSeamTests {
    @Test(arguments: [0, 100])
    func aClearMadeWhileTheFetcherAnswersWinsOverItsValue(_ ramCount: Int) async throws {
        let folder = TemporaryDirectory()
        let started = Counter()
        let gate = Gate()
        let cache = try folder.stringBuilder().maxRamCount(ramCount).fetcher { _ in
            started.increment()
            try await gate.wait()
            return "fetched before the clear"
        }.build()
        let caller = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { started.value == 1 })
        cache.removeAll()
        gate.open()
        _ = try await caller.value
        await cache.flush()
        #expect(cache["k"] == nil, "maxRamCount(\(ramCount)): the fetch begun before the clear was stored")
        #expect(folder.entryFiles().isEmpty)
    }

    @Test(arguments: [0, 100])
    func aClearMadeWhileTheSharedLevelAnswersWinsOverItsValue(_ ramCount: Int) async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let writer = try folder.stringBuilder("writer").sharedLevel(level).build()
        writer["k"] = "old"
        await writer.flush()
        let cache = try folder.stringBuilder().maxRamCount(ramCount).sharedLevel(level).build()
        let held = level.holdNextGet()
        let reader = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { level.getsStarted == 1 })
        cache.removeAll()
        held.open()
        #expect(try await reader.value == "old")
        await cache.flush()
        #expect(level.store.values["k"] == nil)
        #expect(cache["k"] == nil, "maxRamCount(\(ramCount)): the value the clear removed came back")
        #expect(folder.entryFiles().isEmpty)
    }

    /// Another cache on the container changes the key, or clears, while this one's fetch is under way.
    @Test(arguments: [0, 100], ["save", "removeValue", "removeAll"])
    func aPeersChangeMadeWhileTheFetcherAnswersWinsOverItsValue(_ ramCount: Int, _ change: String) async throws {
        let folder = TemporaryDirectory()
        let started = Counter()
        let gate = Gate()
        let cache = try folder.stringBuilder().maxRamCount(ramCount).fetcher { _ in
            started.increment()
            try await gate.wait()
            return "fetched before the change"
        }.build()
        let peer = try folder.stringBuilder().maxRamCount(0).build()
        let caller = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { started.value == 1 })
        switch change {
        case "save": try await peer.save("saved by the peer", forKey: "k")
        case "removeValue": peer.removeValue(forKey: "k")
        default: peer.removeAll()
        }
        gate.open()
        _ = try await caller.value
        await cache.flush()
        let expected: String? = change == "save" ? "saved by the peer" : nil
        #expect(cache["k"] == expected, "maxRamCount(\(ramCount)), \(change): the older fetch was stored")
        #expect(peer["k"] == expected)
    }
}
