import Foundation
import Testing

@testable import Hoard

#if canImport(Glibc)
import Glibc
#endif

/// File-system faults: a full disk, a read-only or unreadable container, a deleted one, no descriptors.
///
/// Each time the cache reports the failure (delegate and logger), keeps serving memory, damages no
/// entry, and works again once the fault clears.
@Suite(.timeLimit(.minutes(10)))
struct FaultsTests {
    @Test(.enabled(if: FaultSupport.canMountFilesystems, "needs root (CAP_SYS_ADMIN) to mount a small tmpfs"))
    func aFullDiskIsReportedServedFromMemoryAndRecoveredFrom() async throws {
        TestLog.install()
        let folder = TemporaryDirectory()
        let small = folder.url.appendingPathComponent("small", isDirectory: true)
        try FileManager.default.createDirectory(at: small, withIntermediateDirectories: true)
        try FaultSupport.mountTmpfs(at: small.path, size: "256k")
        defer {
            FaultSupport.unmount(small.path)
            withExtendedLifetime(folder) {}
        }
        let delegate = RecordingDelegate<Data>()
        func value(_ index: Int) -> Data { Data(repeating: UInt8(index), count: 16_384) }
        let cache = try CacheBuilder<Data>(serializer: DataSerializer())
            .containerName("full")
            .directory(small)
            .maxRamCount(100)
            .maxDiskCount(100)
            .delegate(delegate)
            .build()
        for index in 0..<40 { cache["k\(index)"] = value(index) }
        await cache.flush()

        // 40 × 16 KiB do not fit in 256 KiB: the writes that did not fit are reported.
        let failed = delegate.events.compactMap { if case .storeFailure(let key) = $0 { key } else { nil } }
        #expect(!failed.isEmpty)
        let error = try #require(delegate.lastStoreError as? CacheError)
        #expect(error.code == .io)
        #expect((error.underlyingError as? CacheError.FileError)?.errorNumber == ENOSPC)
        #expect(
            TestLog.messages(containing: small.path).contains {
                $0.level >= .warning && $0.message.contains("Cannot write")
            }
        )
        // Memory serves every value, and what is on disk is intact.
        for index in 0..<40 { #expect(cache["k\(index)"] == value(index)) }
        let container = small.appendingPathComponent("full").path
        try FaultSupport.expectIntactEntries(in: container, count: cache.diskCount) { key, payload in
            guard let index = Int(key.dropFirst()) else { return false }
            return payload == value(index)
        }
        #expect(cache.diskCount == 40 - Set(failed).count)

        // The fault clears: the same writes now land.
        try FaultSupport.remountTmpfs(at: small.path, size: "4m")
        for key in Set(failed) { cache[key] = value(Int(key.dropFirst()) ?? 0) }
        await cache.flush()
        #expect(delegate.events.count { if case .storeFailure = $0 { true } else { false } } == failed.count)
        let reopened = try CacheBuilder<Data>(serializer: DataSerializer())
            .containerName("full")
            .directory(small)
            .maxRamCount(0)
            .maxDiskCount(100)
            .build(sharingStore: false)
        for index in 0..<40 { #expect(reopened["k\(index)"] == value(index)) }
        try FaultSupport.expectIntactEntries(in: container, count: 40) { _, _ in true }
    }

    @Test func aContainerDeletedWhileOpenIsCreatedAgainByTheNextWrite() async throws {
        TestLog.install()
        let folder = TemporaryDirectory()
        let delegate = RecordingDelegate<String>()
        let cache = try folder.stringBuilder().delegate(delegate).exclusiveProcess(true).build()
        cache["before"] = "on disk"
        await cache.flush()

        try FileManager.default.removeItem(at: folder.container())
        #expect(cache["before"] == "on disk")
        cache["after"] = "written after the deletion"
        await cache.flush()
        #expect(delegate.events.isEmpty)
        #expect(folder.entryFiles().count == 1)
        cache.clearMemory()
        #expect(cache["before"] == nil)
        #expect(cache["after"] == "written after the deletion")
        // The next write found the index gone with the folder and rebuilt it from the new folder.
        #expect(cache.diskCount == 1)
        #expect(cache.allKeys == ["after"])
        // The folder made again is locked against other processes like the first one.
        #expect(ContainerLock.isHeld(at: folder.container().path))
        let refused = try await WorkerProcess.run(["try-open", folder.url.path, "test"])
        #expect(refused.ending == .exited(3))
        let reopened = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        #expect(reopened["after"] == "written after the deletion")
    }

    @Test func aContainerIsNotCreatedAgainWhenItsParentFolderWasDeletedToo() async throws {
        let folder = TemporaryDirectory()
        let parent = folder.url.appendingPathComponent("app", isDirectory: true)
        let delegate = RecordingDelegate<String>()
        let cache = try CacheBuilder<String>(serializer: StringSerializer())
            .containerName("test")
            .directory(parent)
            .delegate(delegate)
            .build()
        // Once the opening's background work is done: a file it makes meanwhile can fail the
        // removal (a folder emptied and then written to cannot be removed).
        await cache.flush()
        try FileManager.default.removeItem(at: parent)
        cache["k"] = "in memory only"
        await cache.flush()
        #expect(delegate.events == [.storeFailure("k")])
        #expect(!FileManager.default.fileExists(atPath: parent.path))
        #expect(cache["k"] == "in memory only")
    }

    @Test(FaultSupport.permissionsCanBeTested)
    func aReadOnlyThenUnreadableContainerIsSurvived() async throws {
        let folder = TemporaryDirectory()
        // Root ignores permissions: run the scenario as an unprivileged user, from a copy of the
        // worker that user can reach (the build folder may be inside a folder only root can enter).
        let (user, executable) = try FaultSupport.unprivilegedWorker(in: folder)
        if user != nil { #expect(chown(folder.url.path, FaultSupport.nobody, FaultSupport.nogroup) == 0) }
        let result = try await WorkerProcess.run(
            ["faults-permissions", folder.url.path],
            asUser: user,
            executable: executable
        )
        FaultSupport.expectPassed(result)
    }

    @Test(FaultSupport.permissionsCanBeTested)
    func aWriteToAReadOnlyContainerSaysWhichCallFailedWhereAndWhy() async throws {
        let folder = TemporaryDirectory()
        let container = folder.url.appendingPathComponent("ro", isDirectory: true)
        do {
            let cache = try CacheBuilder<String>(serializer: StringSerializer())
                .containerName("ro")
                .directory(folder.url)
                .build()
            cache["k1"] = "old"
            await cache.flush()
        }
        // Read-only for everyone; root ignores permissions, so the worker runs as another user, from
        // a copy of itself that user can reach.
        let (user, executable) = try FaultSupport.unprivilegedWorker(in: folder)
        for name in try FileManager.default.contentsOfDirectory(atPath: container.path) {
            #expect(chmod(container.path + "/" + name, 0o444) == 0)
        }
        #expect(chmod(container.path, 0o555) == 0)
        #expect(chmod(folder.url.path, 0o755) == 0)
        defer { chmod(container.path, 0o755) }
        let result = try await WorkerProcess.run(
            ["faults-read-only", folder.url.path, "ro"],
            asUser: user,
            executable: executable
        )
        #expect(result.ending == .exited(0))
        #expect(result.lines.last == "done", "\(result.lines)")
        let message = try #require(result.lines.first { $0.hasPrefix("message ") }, "\(result.lines)")
        #expect(message.contains("Cannot write the entry for key \"k2\""), "\(message)")
        #expect(message.contains("openat(\(container.path)/"), "\(message)")
        #expect(message.contains("Permission denied (errno \(EACCES))"), "\(message)")
        let underlying = try #require(result.lines.first { $0.hasPrefix("underlying ") }, "\(result.lines)")
        #expect(underlying.hasPrefix("underlying openat \(EACCES) \(container.path)/"), "\(underlying)")
    }

    /// An entry file that a rebuild cannot read is left alone, not taken for damage.
    ///
    /// No permission stands for any failure that may pass (too many open files): once the file can
    /// be read, the next rebuild finds it. The rebuild runs in a child process, as another user when
    /// this one is root.
    @Test(FaultSupport.permissionsCanBeTested)
    func anEntryFileARebuildCannotReadIsKept() async throws {
        let folder = TemporaryDirectory()
        do {
            let cache = try folder.stringBuilder().build(sharingStore: false)
            cache["locked"] = "kept"
            cache["open"] = "read"
            await cache.flush()
        }
        let container = folder.container()
        let index = container.appendingPathComponent(ContainerFile.index)
        try FileManager.default.removeItem(at: index)
        let locked = container.appendingPathComponent(DiskKey("locked").fileName).path
        let (user, executable) = try FaultSupport.unprivilegedWorker(in: folder)
        if user != nil {
            let names = try FileManager.default.contentsOfDirectory(atPath: container.path)
            for path in [folder.url.path, container.path] + names.map({ container.path + "/" + $0 }) {
                #expect(chown(path, FaultSupport.nobody, FaultSupport.nogroup) == 0, "\(path)")
            }
        }
        #expect(chmod(locked, 0o000) == 0)
        let result = try await WorkerProcess.run(
            ["write", folder.url.path, "test", "probe", "written"],
            asUser: user,
            executable: executable
        )
        #expect(result.lines.last == "flushed", "\(result.lines)")
        #expect(RawFiles.exists(locked), "the rebuild removed an entry file it could not read")

        #expect(chmod(locked, 0o600) == 0)
        try FileManager.default.removeItem(at: index)
        let reopened = try folder.stringBuilder().build(sharingStore: false)
        #expect(reopened.diskCount == 3)
        #expect(reopened["locked"] == "kept")
        #expect(reopened["open"] == "read")
        #expect(reopened["probe"] == "written")
    }

    @Test func runningOutOfFileDescriptorsIsSurvived() async throws {
        let folder = TemporaryDirectory()
        let result = try await WorkerProcess.run(["faults-descriptors", folder.url.path])
        FaultSupport.expectPassed(result)
    }
}
