import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// The background index load × its own eviction.
///
/// A container reopened with a lower disk limit is brought within it when the index loads, and a disk hit served before the load must count there
/// too. LRU "removes the entry read or written the longest time ago".
@Suite struct CacheEarlyReadLoadEvictionTests {
    @Test func aDiskHitBeforeTheLoadIsSparedByTheLoadsOwnEviction() async throws {
        let folder = TemporaryDirectory()
        let closing: DispatchGroup
        do {
            let cache = try folder.stringBuilder().maxRamCount(1).maxDiskCount(3).evictionPolicy(.lru).build()
            closing = try #require(cache.disk).closing.group
            for key in ["a", "b", "c"] { cache[key] = key.uppercased() }  // a is the oldest
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
        // Reopened with room for two: the load evicts one entry.
        let cache = try folder.stringBuilder().maxRamCount(1).maxDiskCount(2).evictionPolicy(.lru).build()
        #expect(await signalled(started, within: 600))
        #expect(cache["a"] == "A")  // a disk hit before the index has loaded: a is now the most recent
        gate.open()
        #expect(await onPlainThread { cache.diskCount } == 2)  // waits for the load
        #expect(cache.disk?.keysInEvictionOrder == ["c", "a"], "the load evicted the entry read last")
        #expect(folder.entryFiles().count == 2)
    }
}
