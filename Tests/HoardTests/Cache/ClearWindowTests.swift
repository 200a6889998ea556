import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// A fetch or a shared read that answers in the middle of `removeAll()`, between its steps: what
/// it returns must not outlive the clear on any level (memory, disk, the shared level), with a
/// memory level or without.
@Suite(.timeLimit(.minutes(10)), .validatesCacheInvariants)
struct ClearWindowTests {
    /// A fetch begun before the clear answers once disk is cleared (`clearedDisk`), or once the
    /// shared level's clear is asked for too (`clearedShared`).
    @Test(arguments: [0, 100], [ClearTestHooks.Event.clearedDisk, .clearedShared])
    func aFetchBegunBeforeTheClearThatAnswersDuringItIsNotKept(
        _ ramCount: Int,
        _ event: ClearTestHooks.Event
    ) async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let started = Counter()
        let gate = Gate()
        let cache = try folder.stringBuilder().maxRamCount(ramCount).sharedLevel(level).fetcher { _ in
            started.increment()
            try await gate.wait()
            return "fetched before the clear"
        }.build()
        let caller = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { started.value == 1 })
        let landed = await removeAll(cache, at: event) {
            gate.open()
            return caller
        }
        #expect(try landed?.get() == "fetched before the clear")
        await cache.flush()
        #expect(cache["k"] == nil, "maxRamCount(\(ramCount)), \(event): the fetch begun before the clear was kept")
        #expect(folder.entryFiles().isEmpty, "maxRamCount(\(ramCount)), \(event): its value is on disk")
        #expect(level.store.values["k"] == nil, "maxRamCount(\(ramCount)), \(event): its value is on the shared level")
        #expect(try folder.stringBuilder().build()["k"] == nil)
    }

    /// A read begun in the middle of the clear, once disk is cleared but before the shared level's
    /// clear is asked for, finds the older value there: it may return it, not keep it.
    @Test(arguments: [0, 100])
    func aSharedReadBegunDuringTheClearDoesNotKeepTheValueItClears(_ ramCount: Int) async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let writer = try folder.stringBuilder("writer").sharedLevel(level).build()
        writer["k"] = "old"
        await writer.flush()
        let cache = try folder.stringBuilder().maxRamCount(ramCount).sharedLevel(level).build()
        let landed = await removeAll(cache, at: .clearedDisk) {
            Task { try await cache.getOrFetch(forKey: "k") }
        }
        #expect(try landed?.get() == "old")
        await cache.flush()
        #expect(cache["k"] == nil, "maxRamCount(\(ramCount)): the value the clear removed came back")
        #expect(folder.entryFiles().isEmpty, "maxRamCount(\(ramCount)): the value the clear removed is on disk")
        #expect(level.store.values["k"] == nil)
        #expect(try folder.stringBuilder().build()["k"] == nil)
    }

    /// Another cache on the container clears it while this one's fetch, begun before, answers.
    @Test(arguments: [0, 100])
    func aPeersClearIsNotUndoneByAFetchThatAnswersDuringIt(_ ramCount: Int) async throws {
        let folder = TemporaryDirectory()
        let started = Counter()
        let gate = Gate()
        let cache = try folder.stringBuilder().maxRamCount(ramCount).fetcher { _ in
            started.increment()
            try await gate.wait()
            return "fetched before the clear"
        }.build()
        let peer = try folder.stringBuilder().maxRamCount(0).build()
        let caller = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { started.value == 1 })
        let landed = await removeAll(peer, at: .clearedShared) {
            gate.open()
            return caller
        }
        #expect(try landed?.get() == "fetched before the clear")
        await cache.flush()
        #expect(cache["k"] == nil, "maxRamCount(\(ramCount)): the fetch begun before the peer's clear was kept")
        #expect(peer["k"] == nil)
        #expect(folder.entryFiles().isEmpty, "maxRamCount(\(ramCount)): its value is on disk")
    }

    /// Calls `cache.removeAll()` on a plain thread; at `event`, starts (or lets go) the read that
    /// `landing` returns and holds the clear there until the read has answered.
    ///
    /// - Returns: What the read answered, or `nil` when the clear never reached `event`.
    private func removeAll(
        _ cache: Cache<String>,
        at event: ClearTestHooks.Event,
        landing: @escaping @Sendable () -> Task<String, any Error>
    ) async -> Result<String, any Error>? {
        let landed = Protected<Result<String, any Error>?>(nil)
        ClearTestHooks.installed.set(
            { reached in
                guard reached == event else { return }
                let read = landing()
                let answered = DispatchSemaphore(value: 0)
                Task {
                    let result = await read.result
                    landed.withLock { $0 = result }
                    answered.signal()
                }
                _ = answered.wait(timeout: .now() + .seconds(600))
            },
            for: cache
        )
        defer { ClearTestHooks.installed.set(nil, for: cache) }
        await onPlainThread { cache.removeAll() }
        return landed.withLock { $0 }
    }
}
