import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// A fill that answers while a loss of tracking drops the local copies, between the disk's clear
/// and its end: the closed gate keeps it off both local levels, so a change that went unannounced
/// during the loss is read once tracking is back.
extension CacheCoherenceTests {
    @Test func aSharedReadAnsweringWhileALossDropsTheLocalCopiesIsNotKept() async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try await coherentCache(folder, level, duringOutage: .bypassLocalCopies)
        level.store.plant(envelope("k", "read during the loss"), forKey: "k")
        let landed = Protected<Result<String, any Error>?>(nil)
        ClearTestHooks.installed.set(
            { event in
                guard event == .droppedLocalDisk else { return }
                let answered = DispatchSemaphore(value: 0)
                Task {
                    let result = await Task { try await cache.getOrFetch(forKey: "k") }.result
                    landed.withLock { $0 = result }
                    answered.signal()
                }
                _ = answered.wait(timeout: .now() + .seconds(600))
            },
            for: cache
        )
        defer { ClearTestHooks.installed.set(nil, for: cache) }
        level.announce(.all(reason: "lost"))
        #expect(await waitUntil { landed.withLock { $0 } != nil && !cache.isClearingDisk })
        #expect(try landed.withLock { $0 }?.get() == "read during the loss")
        await cache.flush()
        #expect(cache.memory?.value(forKey: "k") == nil, "the read answering during the drop is in memory")
        #expect(folder.entryFiles().isEmpty, "the read answering during the drop is on disk")
        // A change the loss kept from being announced, then tracking is back.
        level.store.plant(envelope("k", "changed during the loss"), forKey: "k")
        level.announce(.tracking)
        #expect(await waitUntil { cache.isCoherent && !cache.isClearingDisk })
        #expect(try await cache.getOrFetch(forKey: "k") == "changed during the loss")
    }
}
