import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// A read made while this cache's own removal or clear is still on its way to the shared level: the
/// shared level holds the value the change replaces until the change is made, and a read must never
/// return it.
@Suite(.timeLimit(.minutes(10)))
struct SharedOwnChangeReadTests {
    init() { TestLog.install() }

    /// The change a test holds on its way to the shared level.
    enum Change: CaseIterable, Sendable {
        case removal
        case clear
    }

    @Test(arguments: Change.allCases)
    func aReadDuringAnOwnChangeNeverReturnsWhatItReplaces(_ change: Change) async throws {
        let folder = TemporaryDirectory()
        let shared = GatedInvalidatingLevel()
        let cache = try CacheBuilder<String>().containerName("c").directory(folder.url).sharedLevel(shared).build()
        try await cache.save("old", forKey: "k")
        let gate = change == .removal ? shared.holdNextRemoval() : shared.holdNextClear()
        switch change {
        case .removal: cache.removeValue(forKey: "k")
        case .clear: cache.removeAll()
        }
        // The change has reached the shared level, which still holds "old".
        #expect(await waitUntil { shared.heldChanges == 1 })
        #expect(shared.base.store.values["k"] != nil)
        let read = Task { try? await cache.getOrFetch(forKey: "k") }
        // Opened before the read is awaited, so that a failing run ends rather than hangs.
        #expect(await waitUntil { shared.base.getsStarted > 0 || cache.flights.waiterCount(forKey: "k") > 0 })
        gate.open()
        #expect(await read.value == nil, "the read returned the value this cache's own \(change) replaced")
        withExtendedLifetime(folder) {}
    }

    /// With a fetcher, the value fetched after the change is made is stored, not refused as if the
    /// change had come during the fetch.
    @Test func aValueFetchedAfterAnOwnRemovalIsKept() async throws {
        let folder = TemporaryDirectory()
        let shared = GatedInvalidatingLevel()
        let cache = try CacheBuilder<String>().containerName("c").directory(folder.url).sharedLevel(shared)
            .fetcher { _ in "fetched" }.build()
        try await cache.save("old", forKey: "k")
        let gate = shared.holdNextRemoval()
        cache.removeValue(forKey: "k")
        #expect(await waitUntil { shared.heldChanges == 1 })
        let read = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { shared.base.getsStarted > 0 || cache.flights.waiterCount(forKey: "k") > 0 })
        gate.open()
        #expect(try await read.value == "fetched")
        await cache.flush()
        #expect(cache.memory?.peek("k")?.value == "fetched", "the fetched value was not kept in memory")
        #expect(shared.base.store.values["k"] != nil, "the fetched value did not reach the shared level")
        withExtendedLifetime(folder) {}
    }
}
