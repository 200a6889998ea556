import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Where a durable `save` meets a `removeAll()` made while its writes are under way: the save
/// returns, and the clear wins on every level (the value never comes back).
@Suite(.timeLimit(.minutes(10)), .validatesCacheInvariants)
struct SaveClearSeamTests {
    @Test func aClearWhileTheSavedValueIsSerializedLeavesNoFile() async throws {
        let folder = TemporaryDirectory()
        let blocking = BlockingSerializer()
        let builder = CacheBuilder<String>(serializer: blocking).containerName("c").directory(folder.url)
        let cache = try builder.build()
        let saving = Task { try await cache.save("v", forKey: "k") }
        #expect(await waitUntil { blocking.started.value >= 1 })
        cache.removeAll()
        #expect(cache["k"] == nil)
        blocking.gate.open()
        try await saving.value
        await cache.flush()
        #expect(cache["k"] == nil)
        #expect(folder.entryFiles(in: "c").isEmpty)
        let reopened = try builder.maxRamCount(0).build(sharingStore: false)
        #expect(reopened["k"] == nil)
    }

    @Test func aClearWhileTheSavedValueGoesToTheSharedLevelLeavesItNowhere() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try folder.stringBuilder().sharedLevel(level).build()
        let held = level.holdNextSet()
        let saving = Task { try await cache.save("v", forKey: "k") }
        #expect(await waitUntil { level.setsStarted == 1 })
        cache.removeAll()
        #expect(cache["k"] == nil)
        held.open()
        try await saving.value
        await cache.flush()
        #expect(level.store.values["k"] == nil)
        #expect(cache["k"] == nil)
        #expect(folder.entryFiles().isEmpty)
        let other = try folder.stringBuilder("other").sharedLevel(level).build()
        await #expect(throws: CacheError.self) { try await other.getOrFetch(forKey: "k") }
    }
}
