import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Another process clears the container while a fetch of this one is under way: the fetch answers
/// after the clear, and what it returns must not outlive the clear on this process's disk level.
///
/// The clear reaches this process as journal news, after the files are gone: a fill stored before
/// this process caught up with it must not land over it.
@Suite(.timeLimit(.minutes(10)))
struct OtherProcessClearTests {
    /// A second store on the container (`sharingStore: false`), as another process has, clears it.
    @Test(arguments: [0, 100])
    func aFetchBegunBeforeAnotherStoresClearIsNotWrittenAfterIt(_ ramCount: Int) async throws {
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
        let other = try folder.stringBuilder().build(sharingStore: false)
        other.removeAll()
        await other.flush()
        gate.open()
        #expect(try await caller.value == "fetched before the clear")
        // The flush lands the fill's write, catching up with the clear first.
        await cache.flush()
        #expect(folder.entryFiles().isEmpty, "maxRamCount(\(ramCount)): the fetch begun before the clear is on disk")
        #expect(cache["k"] == nil, "maxRamCount(\(ramCount)): the fetch begun before the clear was kept")
        #expect(try folder.stringBuilder().build(sharingStore: false)["k"] == nil)
        withExtendedLifetime(other) {}
    }

    /// The same with a real second process (`hoard-test-worker clear`).
    @Test func aFetchBegunBeforeAnotherProcesssClearIsNotWrittenAfterIt() async throws {
        let folder = TemporaryDirectory()
        let started = Counter()
        let gate = Gate()
        let cache = try folder.stringBuilder().fetcher { _ in
            started.increment()
            try await gate.wait()
            return "fetched before the clear"
        }.build()
        cache["other"] = "set before the clear"
        await cache.flush()
        let caller = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { started.value == 1 })
        let cleared = try await WorkerProcess.run(["clear", folder.url.path, "test"])
        #expect(cleared.lines == ["cleared"] && cleared.ending == .exited(0))
        gate.open()
        #expect(try await caller.value == "fetched before the clear")
        await cache.flush()
        #expect(folder.entryFiles().isEmpty, "the fetch begun before the other process's clear is on disk")
        #expect(cache["k"] == nil)
        #expect(cache["other"] == nil)
        #expect(try folder.stringBuilder().build(sharingStore: false)["k"] == nil)
    }

    /// A fill that began after this process caught up with the clear is kept as usual.
    @Test func aFetchBegunAfterTheClearWasHeardOfIsKept() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().fetcher { key in "fetched \(key)" }.build()
        let other = try folder.stringBuilder().build(sharingStore: false)
        other.removeAll()
        await other.flush()
        // Caught up with the clear.
        await cache.flush()
        #expect(try await cache.getOrFetch(forKey: "k") == "fetched k")
        await cache.flush()
        #expect(folder.entryFiles().count == 1)
        #expect(try folder.stringBuilder().build(sharingStore: false)["k"] == "fetched k")
        withExtendedLifetime(other) {}
    }

    /// A fill stored after this process caught up with the clear but before its caches heard of it:
    /// the fetch began before the clear, so its value must not land on the cleared disk.
    @Test(arguments: [0, 100])
    func aFetchAnsweringBeforeTheCachesHearOfAnotherStoresClearIsNotWritten(_ ramCount: Int) async throws {
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
        let other = try folder.stringBuilder().build(sharingStore: false)
        other.removeAll()
        await other.flush()
        let store = try #require(cache.engine.disk)
        let landed = holdOnce(store, at: .caughtUpWithPeerClear) {
            gate.open()
            return await caller.result
        }
        defer { ClearTestHooks.installed.set(nil, for: store) }
        // The writer catches up with the clear in the section that lands this write.
        cache["other"] = "set after the clear"
        await cache.flush()
        #expect(try landed.withLock { $0 }?.get() == "fetched before the clear")
        await cache.flush()
        #expect(cache["k"] == nil, "maxRamCount(\(ramCount)): the fetch begun before the clear is served")
        let reopened = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        #expect(reopened["k"] == nil, "maxRamCount(\(ramCount)): the fetch begun before the clear is on disk")
        #expect(reopened["other"] == "set after the clear")
        withExtendedLifetime(other) {}
    }

    /// The same when a caller's thread catches up with the clear (`removeExpired()`): the writer,
    /// which did not, must not land the fill before the caches hear of the clear.
    @Test(arguments: [0, 100])
    func aFillLandingBeforeTheCachesHearOfAnotherStoresClearIsNotWritten(_ ramCount: Int) async throws {
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
        let other = try folder.stringBuilder().build(sharingStore: false)
        other.removeAll()
        await other.flush()
        let store = try #require(cache.engine.disk)
        let landed = holdOnce(store, at: .caughtUpWithPeerClear) {
            gate.open()
            let result = await caller.result
            // The writer lands what it may while the caches have not heard of the clear.
            await cache.flush()
            return result
        }
        defer { ClearTestHooks.installed.set(nil, for: store) }
        await onPlainThread { cache.removeExpired() }
        #expect(try landed.withLock { $0 }?.get() == "fetched before the clear")
        await cache.flush()
        #expect(cache["k"] == nil, "maxRamCount(\(ramCount)): the fetch begun before the clear is served")
        let reopened = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        #expect(reopened["k"] == nil, "maxRamCount(\(ramCount)): the fetch begun before the clear is on disk")
        withExtendedLifetime(other) {}
    }
}
