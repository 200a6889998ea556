import Foundation
import Testing

@testable import Hoard

/// Two processes on one container with `exclusiveProcess(true)`: the second one is refused with
/// `CacheError.containerInUse` until the first one lets go, by closing its caches or by dying.
@Suite(.timeLimit(.minutes(10)))
struct TwoProcessTests {
    @Test func anotherProcessCannotOpenAContainerThisProcessHasOpen() async throws {
        let folder = TemporaryDirectory()
        let path = folder.container().path
        do {
            let cache = try folder.stringBuilder().exclusiveProcess(true).build()
            cache["parent"] = "written by the parent"
            await cache.flush()

            let refused = try await WorkerProcess.run(["try-open", folder.url.path, "test"])
            #expect(refused.ending == .exited(3))
            let message = try #require(refused.lines.first)
            #expect(message.hasPrefix("inUse The container \(path) is open in another process"))
            // The refused process changed nothing.
            #expect(cache["child"] == nil)
            #expect(cache.diskCount == 1)
        }
        // Once every cache on the container is gone, this process lets go of it.
        #expect(await waitUntil { !ContainerLock.isHeld(at: path) })

        let opened = try await WorkerProcess.run(["try-open", folder.url.path, "test"])
        #expect(opened.ending == .exited(0))
        #expect(opened.lines == ["opened written by the parent", "flushed"])
        let reopened = try folder.stringBuilder().build()
        #expect(reopened["child"] == "written by the child")
        #expect(reopened["parent"] == "written by the parent")
    }

    @Test func aContainerAnotherProcessHoldsIsRefusedUntilThatProcessDies() async throws {
        let folder = TemporaryDirectory()
        let holder = try WorkerProcess(["hold", folder.url.path, "test", "exclusive"])
        let ready = await onPlainThread { holder.readLine() }
        #expect(ready == "ready")

        #expect(throws: CacheError.containerInUse) { try folder.stringBuilder().build() }
        #expect(throws: CacheError.containerInUse) { try folder.stringBuilder().exclusiveProcess(true).build() }
        // A disk level on that container reports the same error from its operations.
        let level = DiskCacheLevel<String, String>(
            directory: folder.container(),
            capacity: 10,
            serializer: StringSerializer()
        )
        await #expect(throws: CacheError.containerInUse) { try await level.get("held") }

        // SIGKILL: the kernel releases the lock of a process however it ends.
        holder.kill()
        let ending = await onPlainThread { holder.wait() }
        #expect(ending == .killed(SIGKILL))

        let cache = try folder.stringBuilder().exclusiveProcess(true).build()
        #expect(cache["held"] == "by the child")
        #expect(ContainerLock.isHeld(at: folder.container().path))
    }

    @Test func aProcessThatClosesItsCacheLetsTheNextOneIn() async throws {
        let folder = TemporaryDirectory()
        let holder = try WorkerProcess(["hold", folder.url.path, "test", "exclusive"])
        #expect(await onPlainThread { holder.readLine() } == "ready")
        holder.closeInput()
        let rest = await onPlainThread { (holder.readAllLines(), holder.wait()) }
        #expect(rest.0 == ["released"])
        #expect(rest.1 == .exited(0))
        let cache = try folder.stringBuilder().build()
        #expect(cache["held"] == "by the child")
    }

    @Test func theLockFileIsNeitherAnEntryNorATemporaryFile() async throws {
        let folder = TemporaryDirectory()
        let lockFile = folder.container().appendingPathComponent(ContainerFile.lock).path
        do {
            let cache = try folder.stringBuilder().exclusiveProcess(true).build()
            #expect(FileManager.default.fileExists(atPath: lockFile))
            cache["a"] = "1"
            await cache.flush()
            #expect(cache.diskCount == 1)
            #expect(cache.allKeys == ["a"])
            cache.clearDisk()
            #expect(cache.diskCount == 0)
            // A clear removes entries and temporary files, not the lock that keeps other processes out.
            #expect(FileManager.default.fileExists(atPath: lockFile))
        }
        #expect(await waitUntil { !ContainerLock.isHeld(at: folder.container().path) })
        TestLog.install()
        let reopened = try folder.stringBuilder().build()
        #expect(reopened.diskCount == 0)
        #expect(reopened.allKeys.isEmpty)
        #expect(FileManager.default.fileExists(atPath: lockFile))
        #expect(TestLog.messages(containing: folder.container().path).allSatisfy { $0.level < .warning })
    }

    @Test func storesOfOneProcessShareTheContainerLock() throws {
        let folder = TemporaryDirectory()
        let first = try folder.stringBuilder().exclusiveProcess(true).build()
        // A second store of this process (as a restart test opens) joins the hold instead of failing.
        let second = try folder.stringBuilder().exclusiveProcess(true).build(sharingStore: false)
        #expect(first.disk !== second.disk)
        #expect(ContainerLock.isHeld(at: folder.container().path))
    }
}
