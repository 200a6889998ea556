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
        #expect(try folder.stringBuilder().build(sharingStore: false)["k"] == nil)
    }

    /// The same without a disk level: the shared level's write would be queued after its clear.
    @Test func aFetchAnsweringDuringTheClearOfACacheWithoutDiskLeavesNothingOnTheSharedLevel() async throws {
        let level = FakeInvalidatingLevel()
        let started = Counter()
        let gate = Gate()
        let cache = try CacheBuilder<String>(serializer: StringSerializer()).maxDiskCount(0).sharedLevel(level)
            .fetcher { _ in
                started.increment()
                try await gate.wait()
                return "fetched before the clear"
            }.build()
        let caller = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { started.value == 1 })
        let landed = await removeAll(cache, at: .clearedShared) {
            gate.open()
            return caller
        }
        #expect(try landed?.get() == "fetched before the clear")
        await cache.flush()
        #expect(cache["k"] == nil)
        #expect(level.store.values["k"] == nil, "the fetch begun before the clear is on the shared level")
    }

    /// Once the clear is done, fills are kept again: in the cache that cleared, in the other caches
    /// on the container, and after a clear asked for from a delegate callback during another one.
    @Test(arguments: [0, 100], [false, true])
    func fillsAreKeptAgainOnceTheClearIsDone(_ ramCount: Int, _ nested: Bool) async throws {
        let folder = TemporaryDirectory()
        let delegate = RecordingDelegate<String>()
        let fetches = Counter()
        let cache = try folder.stringBuilder().maxRamCount(ramCount).delegate(delegate).fetcher { key in
            "fetched \(key) #\(fetches.increment())"
        }.build()
        let peer = try folder.stringBuilder("test").maxRamCount(ramCount).fetcher { key in "peer's \(key)" }.build()
        if nested {
            let clears = Counter()
            delegate.onEvent = { cache, event in
                if event == .willClearDisk, clears.increment() == 1 { cache.removeAll() }
            }
        }
        cache.removeAll()
        peer.removeAll()
        #expect(try await cache.getOrFetch(forKey: "a") == "fetched a #1")
        #expect(try await peer.getOrFetch(forKey: "b") == "peer's b")
        await cache.flush()
        await peer.flush()
        #expect(folder.entryFiles().count == 2, "maxRamCount(\(ramCount)), nested \(nested)")
        #expect(cache.engine.stripes.fillsInFlight == 0)
        // Kept: read again, not fetched again.
        #expect(try await cache.getOrFetch(forKey: "a") == "fetched a #1")
        #expect(try await cache.getOrFetch(forKey: "b") == "peer's b")
    }

    /// A delegate that fetches while the clear is under way gets the value; the clear removes it.
    @Test func aFetchFromAClearCallbackIsAnsweredButNotKept() async throws {
        let folder = TemporaryDirectory()
        let delegate = RecordingDelegate<String>()
        let answers = Protected<[String]>([])
        let cache = try folder.stringBuilder().delegate(delegate).fetcher { key in "fetched \(key)" }.build()
        delegate.onEvent = { cache, event in
            guard event == .willClearDisk, let value = try? cache.getOrFetchAndWait(forKey: "k") else { return }
            answers.withLock { $0.append(value) }
        }
        await onPlainThread { cache.removeAll() }
        #expect(answers.withLock { $0 } == ["fetched k"])
        await cache.flush()
        #expect(cache["k"] == nil)
        #expect(folder.entryFiles().isEmpty)
    }

    /// A read begun in the middle of the clear, once disk is cleared, never finds the older value
    /// on the shared level (whose clear was asked for first, and is waited for); what it fetches
    /// instead is returned, not kept.
    @Test(arguments: [0, 100])
    func aSharedReadBegunDuringTheClearDoesNotFindTheValueItClears(_ ramCount: Int) async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let writer = try folder.stringBuilder("writer").sharedLevel(level).build()
        writer["k"] = "old"
        await writer.flush()
        let cache = try folder.stringBuilder().maxRamCount(ramCount).sharedLevel(level).fetcher { _ in
            "fetched during the clear"
        }.build()
        let landed = await removeAll(cache, at: .clearedDisk) {
            Task { try await cache.getOrFetch(forKey: "k") }
        }
        #expect(try landed?.get() == "fetched during the clear")
        await cache.flush()
        #expect(cache["k"] == nil, "maxRamCount(\(ramCount)): the value the clear removed came back")
        #expect(folder.entryFiles().isEmpty, "maxRamCount(\(ramCount)): the value the clear removed is on disk")
        #expect(level.store.values["k"] == nil)
        #expect(try folder.stringBuilder().build(sharingStore: false)["k"] == nil)
    }

    /// A cache opened on the container in the middle of another one's clear joins it: its read
    /// does not find the older value on the shared level (it waits for the other cache's clear
    /// there), and what it fetches instead is returned, not kept, until the clear is done.
    @Test(arguments: [0, 100])
    func aCacheOpenedDuringAPeersClearKeepsNoFillUntilItIsDone(_ ramCount: Int) async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let writer = try folder.stringBuilder("writer").sharedLevel(level).build()
        writer["k"] = "old"
        await writer.flush()
        let cache = try folder.stringBuilder().sharedLevel(level).build()
        let opened = Protected<Cache<String>?>(nil)
        let landed = await removeAll(cache, at: .clearedDisk) {
            Task {
                let peer = try folder.stringBuilder().maxRamCount(ramCount).sharedLevel(level).fetcher { _ in
                    "fetched during the clear"
                }.build()
                opened.withLock { $0 = peer }
                return try await peer.getOrFetch(forKey: "k")
            }
        }
        #expect(try landed?.get() == "fetched during the clear")
        let peer = try #require(opened.withLock { $0 })
        await peer.flush()
        await cache.flush()
        #expect(folder.entryFiles().isEmpty, "maxRamCount(\(ramCount)): the value the clear removed is on disk")
        #expect(cache["k"] == nil, "maxRamCount(\(ramCount)): the value the clear removed came back")
        #expect(peer["k"] == nil, "maxRamCount(\(ramCount)): the cache opened during the clear kept it")
        #expect(try folder.stringBuilder().build(sharingStore: false)["k"] == nil)
        // Once the clear is done, the cache opened during it keeps its fills again.
        writer["j"] = "new"
        await writer.flush()
        #expect(try await peer.getOrFetch(forKey: "j") == "new")
        await peer.flush()
        #expect(folder.entryFiles().count == 1, "maxRamCount(\(ramCount)): a fill after the clear was not kept")
        #expect(peer.engine.stripes.fillsInFlight == 0)
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

    /// A `DiskCacheLevel` on the container clears it while a cache's fetch, begun before, answers
    /// once the files are gone, before the cache hears of the clear.
    @Test(arguments: [0, 100])
    func aDiskLevelsClearIsNotUndoneByAFetchThatAnswersDuringIt(_ ramCount: Int) async throws {
        let folder = TemporaryDirectory()
        let started = Counter()
        let gate = Gate()
        let cache = try folder.stringBuilder().maxRamCount(ramCount).fetcher { _ in
            started.increment()
            try await gate.wait()
            return "fetched before the clear"
        }.build()
        let level = DiskCacheLevel<String, String>(
            directory: folder.container(),
            capacity: 1_000,
            serializer: StringSerializer()
        )
        let caller = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { started.value == 1 })
        let landed = holdOnce(level, at: .clearedDisk) {
            gate.open()
            return await caller.result
        }
        defer { ClearTestHooks.installed.set(nil, for: level) }
        await onPlainThread { level.clearOnThisThread() }
        #expect(try landed.withLock { $0 }?.get() == "fetched before the clear")
        await cache.flush()
        #expect(cache["k"] == nil, "maxRamCount(\(ramCount)): the fetch begun before the level's clear was kept")
        #expect(folder.entryFiles().isEmpty, "maxRamCount(\(ramCount)): its value is on disk")
    }

    /// A set made between the steps of `removeAll()` ends on the shared level.
    ///
    /// As a set made after the clear would: the other instances and a restarted cache find it; a
    /// local level may lack it (a miss there, read from the shared level). Before the shared clear
    /// was queued first, a set made once disk was cleared stayed on disk and was cleared from the
    /// shared level.
    @Test(arguments: [0, 100], [ClearTestHooks.Event.clearedShared, .clearedDisk])
    func aSetMadeDuringTheClearEndsOnTheSharedLevel(_ ramCount: Int, _ event: ClearTestHooks.Event) async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let cache = try folder.stringBuilder().maxRamCount(ramCount).sharedLevel(level).build()
        cache["k"] = "old"
        await cache.flush()
        _ = await removeAll(cache, at: event) {
            cache["k"] = "set during the clear"
            return Task { "set" }
        }
        await cache.flush()
        let context = "maxRamCount(\(ramCount)), \(event)"
        #expect(level.store.values["k"] != nil, "\(context): not on the shared level")
        #expect(try await cache.getOrFetch(forKey: "k") == "set during the clear", "\(context): the cache lost it")
        let other = try folder.stringBuilder("other").sharedLevel(level).build()
        #expect(try await other.getOrFetch(forKey: "k") == "set during the clear", "\(context): another instance")
    }
}
