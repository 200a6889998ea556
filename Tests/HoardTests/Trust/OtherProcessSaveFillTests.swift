import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Another process saves a key while this one's fill of it (a fetched value) waits to land on the
/// container they share: the fill does not land, and the file the save wrote stays, unless the
/// fill stands for a removal this process made of the key and never landed.
///
/// The other process is a second store on the container (`sharingStore: false`), as another process
/// has; this one's writer is held in the serializer of an earlier write, so that its fill is still
/// queued when the other store's save lands.
@Suite(.timeLimit(.minutes(10)))
struct OtherProcessSaveFillTests {
    /// A builder on the container with the serializer its first cache uses (the container records
    /// it), not held.
    func builder(_ folder: TemporaryDirectory) -> CacheBuilder<String> {
        let serializer = BlockingSerializer()
        serializer.gate.open()
        return CacheBuilder<String>(serializer: serializer).containerName("test").directory(folder.url)
    }

    @Test func aFillOvertakenByAnotherProcesssSaveLeavesTheSavedFile() async throws {
        let folder = TemporaryDirectory()
        let blocking = BlockingSerializer()
        let cache = try CacheBuilder<String>(serializer: blocking).containerName("test").directory(folder.url)
            .fetcher { _ in "fetched" }
            .build()
        cache["held"] = "holds the writer"
        #expect(await waitUntil { blocking.started.value == 1 })
        #expect(try await cache.getOrFetch(forKey: "k") == "fetched")
        let other = try builder(folder).build(sharingStore: false)
        try await other.save("saved", forKey: "k")
        blocking.gate.open()
        await cache.flush()
        // The confirmed save is on disk: read by a store that opens the container afresh.
        let reopened = try builder(folder).maxRamCount(0).build(sharingStore: false)
        #expect(reopened["k"] == "saved", "another process's confirmed save was removed by an older fill")
        #expect(cache["k"] == "saved")
        withExtendedLifetime(other) {}
    }

    @Test func aFillThatReplacedAnUnmadeRemovalStillRemovesTheFile() async throws {
        let folder = TemporaryDirectory()
        let blocking = BlockingSerializer()
        let cache = try CacheBuilder<String>(serializer: blocking).containerName("test").directory(folder.url)
            .fetcher { _ in "fetched" }
            .build()
        cache["held"] = "holds the writer"
        #expect(await waitUntil { blocking.started.value == 1 })
        // This process removes the key, then fetches it: the fill replaces the removal, not made yet.
        cache.removeValue(forKey: "k")
        #expect(try await cache.getOrFetch(forKey: "k") == "fetched")
        let other = try builder(folder).build(sharingStore: false)
        try await other.save("saved", forKey: "k")
        blocking.gate.open()
        await cache.flush()
        // Which of the removal and the save is newer cannot be told: the removal is made, and the
        // next read asks the fetcher, never serving a value either process replaced.
        let reopened = try builder(folder).maxRamCount(0).build(sharingStore: false)
        #expect(reopened["k"] == nil)
        #expect(try await cache.getOrFetch(forKey: "k") == "fetched")
        withExtendedLifetime(other) {}
    }

    /// Another process saves the key while this one's fetch of it is under way; this process catches
    /// up with the save on a caller's thread (`removeExpired()`), and the fetch answers before the
    /// caches hear of it: its older value must not land over the saved file.
    @Test func aFillLandingBeforeTheCachesHearOfAnotherProcesssSaveLeavesTheSavedFile() async throws {
        let folder = TemporaryDirectory()
        let started = Counter()
        let gate = Gate()
        let cache = try builder(folder).fetcher { _ in
            started.increment()
            try await gate.wait()
            return "fetched before the save"
        }.build()
        let caller = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { started.value == 1 })
        let other = try builder(folder).build(sharingStore: false)
        try await other.save("saved", forKey: "k")
        let store = try #require(cache.engine.disk)
        let landed = holdOnce(store, at: .caughtUpWithPeerChanges) {
            gate.open()
            let result = await caller.result
            await cache.flush()
            return result
        }
        defer { ClearTestHooks.installed.set(nil, for: store) }
        await onPlainThread { cache.removeExpired() }
        #expect(try landed.withLock { $0 }?.get() == "fetched before the save")
        await cache.flush()
        let reopened = try builder(folder).maxRamCount(0).build(sharingStore: false)
        #expect(reopened["k"] == "saved", "another process's confirmed save was replaced by an older fill")
        #expect(cache["k"] == "saved")
        withExtendedLifetime(other) {}
    }

    /// The same when the writer catches up with the save, in the section that lands another write:
    /// the fill is queued before the caches hear of the save, and lands after.
    @Test func aFillStoredBeforeTheCachesHearOfAnotherProcesssSaveLeavesTheSavedFile() async throws {
        let folder = TemporaryDirectory()
        let started = Counter()
        let gate = Gate()
        let cache = try builder(folder).fetcher { _ in
            started.increment()
            try await gate.wait()
            return "fetched before the save"
        }.build()
        let caller = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { started.value == 1 })
        let other = try builder(folder).build(sharingStore: false)
        try await other.save("saved", forKey: "k")
        let store = try #require(cache.engine.disk)
        let landed = holdOnce(store, at: .caughtUpWithPeerChanges) {
            gate.open()
            return await caller.result
        }
        defer { ClearTestHooks.installed.set(nil, for: store) }
        cache["other"] = "set after the save"
        await cache.flush()
        #expect(try landed.withLock { $0 }?.get() == "fetched before the save")
        await cache.flush()
        let reopened = try builder(folder).maxRamCount(0).build(sharingStore: false)
        #expect(reopened["k"] == "saved", "another process's confirmed save was replaced by an older fill")
        #expect(cache["k"] == "saved")
        withExtendedLifetime(other) {}
    }
}
