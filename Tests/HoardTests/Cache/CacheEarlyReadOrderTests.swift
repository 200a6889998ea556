import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// The seam between the index that loads in the background and the eviction order: a disk hit
/// served before the load counts once the index has loaded.
@Suite struct CacheEarlyReadOrderTests {
    /// A disk-heavy LRU cache: one value in memory, three on disk.
    private static func builder(_ folder: TemporaryDirectory) -> CacheBuilder<String> {
        folder.stringBuilder().maxRamCount(1).maxDiskCount(3).evictionPolicy(.lru)
    }

    /// Writes a, b and c (oldest first), and waits until that cache's store has closed.
    private static func fill(_ folder: TemporaryDirectory) async throws {
        let closing: DispatchGroup
        do {
            let cache = try builder(folder).build()
            closing = try #require(cache.disk).closing.group
            for key in ["a", "b", "c"] { cache[key] = key.uppercased() }
            await cache.flush()
        }
        #expect(await waitUntilClosed(closing))
    }

    /// Holds the background load of the container at `path` until the returned gate opens.
    private static func holdLoad(at path: String) -> (gate: ThreadGate, started: DispatchSemaphore) {
        let gate = ThreadGate()
        let started = DispatchSemaphore(value: 0)
        DiskStore.testHooks.set(
            { event in
                guard event == .loadingInBackground else { return }
                started.signal()
                gate.wait()
            },
            at: path
        )
        return (gate, started)
    }

    @Test func aDiskHitBeforeTheLoadSparesTheKeyFromTheNextEviction() async throws {
        let folder = TemporaryDirectory()
        try await Self.fill(folder)
        let path = try Directory.create(at: folder.container())
        let (gate, started) = Self.holdLoad(at: path)
        defer {
            gate.open()
            DiskStore.testHooks.set(nil, at: path)
        }
        let closing: DispatchGroup
        do {
            let cache = try Self.builder(folder).build()
            closing = try #require(cache.disk).closing.group
            #expect(await signalled(started, within: 600))
            // The load is held: this read is a disk hit made before the index is there.
            #expect(cache["a"] == "A")
            cache["d"] = "D"  // queued behind the load; the disk is full, and b is now the least recent
            gate.open()
            await cache.flush()
            #expect(cache.disk?.keysInEvictionOrder == ["c", "a", "d"])
        }
        #expect(await waitUntilClosed(closing))
        let third = try Self.builder(folder).build(sharingStore: false)
        #expect(third["b"] == nil)
        #expect(third["a"] == "A")
        #expect(third["c"] == "C")
        #expect(third["d"] == "D")
    }

    @Test func aDiskHitBeforeTheLoadIsSavedWhenTheCacheIsReleasedAtOnce() async throws {
        let folder = TemporaryDirectory()
        try await Self.fill(folder)
        let path = try Directory.create(at: folder.container())
        let (gate, started) = Self.holdLoad(at: path)
        defer {
            gate.open()
            DiskStore.testHooks.set(nil, at: path)
        }
        weak var closed: DiskStore?
        let closing: DispatchGroup
        do {
            let cache = try Self.builder(folder).build()
            closed = cache.disk
            closing = try #require(cache.disk).closing.group
            #expect(await signalled(started, within: 600))
            #expect(cache["a"] == "A")
        }
        // The cache is gone before its store loaded the index: the store stays open for the load,
        // which applies the read, and saves the order as it closes.
        #expect(closed != nil)
        gate.open()
        #expect(await waitUntilClosed(closing))
        let reopened = try Self.builder(folder).build(sharingStore: false)
        #expect(reopened.disk?.keysInEvictionOrder == ["b", "c", "a"])
    }
}

/// Enough reads before the load to call for an index save: the writer still runs afterwards.
@Suite struct CacheEarlyReadsSaveTests {
    @Test func manyReadsBeforeTheLoadLeaveTheWriterRunning() async throws {
        let folder = TemporaryDirectory()
        let builder = folder.stringBuilder().maxRamCount(0).maxDiskCount(10)
        let closing: DispatchGroup
        do {
            let cache = try builder.build()
            closing = try #require(cache.disk).closing.group
            cache["a"] = "A"
            await cache.flush()
        }
        #expect(await waitUntilClosed(closing))
        let path = try Directory.create(at: folder.container())
        let gate = ThreadGate()
        let started = DispatchSemaphore(value: 0)
        DiskStore.testHooks.set(
            { event in
                guard event == .loadingInBackground else { return }
                started.signal()
                gate.wait()
            },
            at: path
        )
        defer {
            gate.open()
            DiskStore.testHooks.set(nil, at: path)
        }
        let cache = try builder.build()
        #expect(await signalled(started, within: 600))
        // More disk hits than the changes that make the writer save the index.
        for _ in 0...DiskStore.changesBetweenIndexSaves { #expect(cache["a"] == "A") }
        gate.open()
        #expect(await onPlainThread { cache.diskCount } == 1)  // waits for the load
        // The writer must still take new work: a set lands and a flush returns.
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            cache["b"] = "B"
            await cache.flush()
            done.signal()
        }
        #expect(await signalled(done, within: 600), "the writer never ran again after the load")
        #expect(folder.entryFiles().count == 2)
    }
}
