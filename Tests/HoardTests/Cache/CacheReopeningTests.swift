import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// The seam between releasing a cache (whose writer may still hold its store) and opening its
/// container again in the same process with other settings.
@Suite struct CacheReopeningTests {
    private struct Thing: Codable, Sendable, Equatable { var name: String }
    private struct OtherThing: Codable, Sendable, Equatable { var size: Int }

    @Test func aVersionBumpRightAfterAReleaseOpensTheContainerAfresh() async throws {
        for _ in 0..<20 {
            let folder = TemporaryDirectory()
            do {
                let things = try CacheBuilder<Thing>().containerName("c").directory(folder.url).build()
                try await things.save(Thing(name: "old"), forKey: "k")
            }
            let others = try CacheBuilder<OtherThing>().containerName("c").directory(folder.url).version(2).build()
            #expect(others["k"] == nil)
            try await others.save(OtherThing(size: 2), forKey: "k")
            #expect(others["k"] == OtherThing(size: 2))
        }
    }

    @Test func anOpeningWithOtherSettingsWaitsForTheReleasedCachesWritesThenOpensAfresh() async throws {
        let folder = TemporaryDirectory()
        let serializer = BlockingSerializer()
        weak var closed: DiskStore?
        weak var released: Cache<String>?
        do {
            let cache = try CacheBuilder<String>(serializer: serializer).containerName("c").directory(folder.url)
                .maxRamCount(0).build()
            closed = cache.disk
            released = cache
            cache["k"] = "written under version 0"
            // The writer is held inside the serializer, holding the store.
            #expect(await waitUntil { serializer.started.value == 1 })
        }
        // The cache is gone (in a loaded run, its last reference may outlive the scope a moment):
        // only the writer holds the store now.
        #expect(await waitUntil { released == nil })
        #expect(closed != nil)
        let opened = Protected<Result<Cache<String>, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let result = Result {
                try CacheBuilder<String>(serializer: StringSerializer()).containerName("c")
                    .directory(folder.url).version(1).maxRamCount(0).build()
            }
            opened.withLock { $0 = result }
            done.signal()
        }
        // The opening waits for the store that nobody uses any more; the held write then lands.
        // Watched and released from a plain thread: the opening's wait for the store is bounded,
        // and a loaded run can stall this test's task (the cooperative pool) for longer than that.
        let waitedWhileHeld = Protected<Bool?>(nil)
        Thread.detachNewThread {
            let finishedWhileHeld = done.wait(timeout: .now() + 0.2) == .success
            waitedWhileHeld.withLock { $0 = !finishedWhileHeld }
            if finishedWhileHeld { done.signal() }
            serializer.gate.open()
        }
        #expect(await signalled(done, within: 600))
        #expect(waitedWhileHeld.withLock { $0 } == true)
        #expect(closed == nil)
        let cache = try #require(try opened.withLock { $0 }?.get())
        #expect(cache["k"] == nil, "a value written under version 0 is a miss under version 1")
        #expect(cache.diskCount == 0)
    }

    @Test func anOpeningWithOtherSettingsStillFailsWhileACacheUsesTheContainer() throws {
        let folder = TemporaryDirectory()
        let open = try folder.stringBuilder().maxDiskCount(10).build()
        #expect(throws: CacheError.invalidConfiguration) { try folder.stringBuilder().maxDiskCount(20).build() }
        let level = DiskCacheLevel<String, String>(
            directory: folder.url.appendingPathComponent("level"),
            capacity: 10,
            serializer: StringSerializer()
        )
        #expect(throws: CacheError.invalidConfiguration) {
            try folder.stringBuilder("level").maxDiskCount(20).build()
        }
        _ = (open, level)
    }
}
