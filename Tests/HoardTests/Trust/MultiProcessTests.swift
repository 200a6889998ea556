import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Several processes on one container, as an app and its extensions or the workers of one service.
@Suite(.timeLimit(.minutes(10)))
struct MultiProcessTests {
    @Test func twoProcessesOpenOneContainerAtOnceAndReadEachOthersFlushedWrites() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().build()
        cache["parent"] = "written by the parent"
        await cache.flush()
        // No lock is held while idle: the child opens, writes and flushes while the parent is open.
        let holder = try WorkerProcess(["hold", folder.url.path, "test"])
        #expect(await onPlainThread { holder.readLine() } == "ready")
        #expect(ContainerLock.isOpen(at: folder.container().path) && !ContainerLock.isHeld(at: folder.container().path))
        // A memory miss reads the file, whether or not this process has heard of the key.
        #expect(cache["held"] == "by the child")
        await cache.flush()
        #expect(cache.diskCount == 2)
        #expect(Set(cache.allKeys) == ["parent", "held"])
        holder.closeInput()
        #expect(await onPlainThread { holder.wait() } == .exited(0))
    }

    @Test func anotherProcessesChangesReachMemoryAtTheNextFlushAndDiskAtOnce() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().build()
        cache["a"] = "old a"
        cache["b"] = "old b"
        cache["c"] = "old c"
        await cache.flush()

        let written = try await WorkerProcess.run(["write", folder.url.path, "test", "a", "new a", "b", "-"])
        #expect(written.lines == ["flushed"])
        // This process's memory level may serve its own copy until it hears of the change…
        #expect(cache["a"] == "old a")
        #expect(
            cache.disk?.read(DiskKey("a"), now: { 0 }, deserialize: { String(decoding: $0, as: UTF8.self) })
                .foundValue == "new a"
        )
        // …which it does at its next flush (or write): the journal names the keys others changed.
        await cache.flush()
        #expect(cache["a"] == "new a")
        #expect(cache["b"] == nil)
        #expect(cache["c"] == "old c")
        #expect(cache.diskCount == 2)
    }

    @Test func anotherProcessesRemovalReachesAMemoryCopyWithNoFileAtTheNextFlush() async throws {
        let folder = TemporaryDirectory()
        // One file at most: the first key's file is evicted while its memory copy stays.
        let cache = try folder.stringBuilder().maxDiskCount(1).build()
        cache["a"] = "old a"
        await cache.flush()
        cache["b"] = "b"
        await cache.flush()
        #expect(cache.diskCount == 1)
        #expect(cache.entry(forKey: "a")?.level == .memory)
        // A second store, as another process has: it removes the key, which has no file.
        let other = try folder.stringBuilder().build(sharingStore: false)
        other.removeValue(forKey: "a")
        await other.flush()
        // The removal reaches the first process's memory at its next flush, as any other change does.
        await cache.flush()
        #expect(cache["a"] == nil)
        #expect(cache["b"] == "b")
    }

    @Test func anotherProcessesRemovalJournaledBeforeAnOwnSetLeavesThatSetsMemoryCopy() async throws {
        let folder = TemporaryDirectory()
        // One file at most: the first key's file is evicted once it lands, while its memory copy stays.
        let cache = try folder.stringBuilder().maxDiskCount(1).build()
        let other = try folder.stringBuilder().build(sharingStore: false)
        // A second store, as another process has: it removes a key no one holds.
        other.removeValue(forKey: "a")
        await other.flush()
        // Set after that removal: this process catches up with it only when the set lands.
        cache["a"] = "new"
        cache["b"] = "b"
        await cache.flush()
        #expect(cache.diskCount == 1)
        // The removal is older than the set: it must not take the set's value away.
        #expect(cache["a"] == "new")
        #expect(cache.entry(forKey: "a")?.level == .memory)
        withExtendedLifetime((cache, other, folder)) {}
    }

    @Test func anotherProcessesClearReachesMemoryAtTheNextFlush() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().build()
        cache["a"] = "old a"
        await cache.flush()
        // A second store, as another process has: it shares no memory with the first.
        let other = try folder.stringBuilder().build(sharingStore: false)
        other.removeAll()
        #expect(other["a"] == nil)
        // The clear reaches the first process's memory at its next flush, as any other change does.
        await cache.flush()
        #expect(cache["a"] == nil)
        #expect(cache.diskCount == 0)
    }

    @Test func aLiveProcessesTemporaryFilesAreKeptAndADeadOnesAreSwept() async throws {
        let folder = TemporaryDirectory()
        let container = folder.container()
        try FileManager.default.createDirectory(at: container, withIntermediateDirectories: true)
        let namespace = String(TemporaryFile.namespace, radix: 16)
        let holder = try WorkerProcess(["hold", folder.url.path, "other"])
        #expect(await onPlainThread { holder.readLine() } == "ready")
        let live = ".hoard-tmp-\(holder.pid)-\(namespace)-1"
        let otherNamespace = ".hoard-tmp-999999-\(String(TemporaryFile.namespace &+ 1, radix: 16))-1"
        let abandoned = ".hoard-tmp-\(holder.pid)-\(namespace)-2"
        for name in [live, otherNamespace, abandoned] {
            try RawFiles.write(Array("half written".utf8), to: container.appendingPathComponent(name).path)
        }
        // Older than any write takes: gone whoever wrote it.
        let old = Date().addingTimeInterval(-TemporaryFile.maximumAge - 60)
        try FileManager.default.setAttributes(
            [.modificationDate: old],
            ofItemAtPath: container.appendingPathComponent(abandoned).path
        )
        let deadName = ".hoard-tmp-\(Self.deadPID())-\(namespace)-1"
        try RawFiles.write(Array("half written".utf8), to: container.appendingPathComponent(deadName).path)

        let cache = try folder.stringBuilder().build()
        #expect(cache.diskCount == 0)
        #expect(RawFiles.exists(container.appendingPathComponent(live).path))
        #expect(RawFiles.exists(container.appendingPathComponent(otherNamespace).path))
        #expect(!RawFiles.exists(container.appendingPathComponent(abandoned).path))
        #expect(!RawFiles.exists(container.appendingPathComponent(deadName).path))
        // A clear keeps them too: they may be writes in progress.
        cache.removeAll()
        #expect(RawFiles.exists(container.appendingPathComponent(live).path))
        holder.closeInput()
        #expect(await onPlainThread { holder.wait() } == .exited(0))
    }

    /// Opening sweeps what dead or long-gone writers left and keeps what a live one is writing, the
    /// same whether the index is intact (the folder is listed for the sweep) or lost (the rebuild's
    /// listing is used).
    @Test(arguments: [true, false])
    func openingSweepsTheSameTemporaryFilesWithOrWithoutAnIndex(indexIsIntact: Bool) async throws {
        let folder = TemporaryDirectory()
        do {
            let cache = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
            for index in 0..<20 { cache["key \(index)"] = "value \(index)" }
            await cache.flush()
        }
        let container = folder.container()
        if !indexIsIntact {
            try FileManager.default.removeItem(at: container.appendingPathComponent(ContainerFile.index))
        }
        let namespace = String(TemporaryFile.namespace, radix: 16)
        let live = ".hoard-tmp-\(getpid())-\(namespace)-1001"
        let stale = ".hoard-tmp-\(getpid())-\(namespace)-1002"
        let dead = ".hoard-tmp-\(Self.deadPID())-\(namespace)-1"
        for name in [live, stale, dead] {
            try RawFiles.write(Array("half written".utf8), to: container.appendingPathComponent(name).path)
        }
        try FileManager.default.setAttributes(
            [.modificationDate: Date().addingTimeInterval(-TemporaryFile.maximumAge - 60)],
            ofItemAtPath: container.appendingPathComponent(stale).path
        )

        let cache = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        #expect(cache.diskCount == 20)
        #expect((0..<20).allSatisfy { cache["key \($0)"] == "value \($0)" })
        #expect(RawFiles.exists(container.appendingPathComponent(live).path))
        #expect(!RawFiles.exists(container.appendingPathComponent(stale).path))
        #expect(!RawFiles.exists(container.appendingPathComponent(dead).path))
        try FileManager.default.removeItem(at: container.appendingPathComponent(live))
    }

    /// A process killed in its section between writing a value's temporary file and renaming it
    /// leaves that file behind: the processes still running sweep it at their next section, rather
    /// than leave it (outside every limit) until some process opens the container again.
    @Test func theSurvivorsSweepTheTemporaryFileOfAProcessKilledInItsSection() async throws {
        let folder = TemporaryDirectory()
        let limit = 64 << 10
        let cache = try folder.stringBuilder().maxRamCount(0).maxDiskBytes(limit).build(sharingStore: false)
        try await cache.save("kept", forKey: "a")
        let container = folder.container()
        // What the kill leaves: the journaled put of a write that never landed, its temporary file,
        // and the lock file naming the dead process as the one in a section.
        let dead = Self.deadPID()
        let temporary = container.appendingPathComponent(
            ".hoard-tmp-\(dead)-\(String(TemporaryFile.namespace, radix: 16))-1"
        ).path
        try RawFiles.write([UInt8](repeating: 0x2a, count: limit), to: temporary)
        let index = container.appendingPathComponent(ContainerFile.index).path
        let put = DiskJournal.Record.put(digest: DiskKey("b").digest, size: limit + 40, expiresAt: .never, key: "b")
        try RawFiles.write(try RawFiles.read(index) + DiskJournal.encode([.begin, put]), to: index)
        let lock = container.appendingPathComponent(ContainerFile.lock).path
        var marked = try RawFiles.read(lock)
        withUnsafeBytes(of: dead.littleEndian) { marked.replaceSubrange(0..<4, with: $0) }
        try RawFiles.write(marked, to: lock)

        try await cache.save("also kept", forKey: "c")
        await cache.flush()
        #expect(!RawFiles.exists(temporary))
        let names = try FileManager.default.contentsOfDirectory(atPath: container.path)
        let bytes = try names.map { try RawFiles.read(container.appendingPathComponent($0).path).count }
        #expect(bytes.reduce(0, +) <= limit)
        #expect(cache["a"] == "kept")
        #expect(cache["c"] == "also kept")
        #expect(cache.disk?.invariantViolations() == [])
    }

    /// A process id no process has: a child that has exited and been reaped.
    private static func deadPID() -> Int32 {
        var pid: Int32 = 1 << 22
        while kill(pid, 0) == 0 || errno != ESRCH { pid -= 1 }
        return pid
    }

    @Test func temporaryFilesGoOnlyWhenTheirWriterIsSurelyGone() {
        let now = 10_000.0
        let ours = TemporaryFile.nextName()
        let namespace = String(TemporaryFile.namespace, radix: 16)
        #expect(TemporaryFile.writer(of: ours)?.pid == getpid())
        #expect(!TemporaryFile.isAbandoned(ours, modified: now, now: now))
        #expect(TemporaryFile.isAbandoned(ours, modified: now - TemporaryFile.maximumAge - 1, now: now))
        let alive = ".hoard-tmp-42-\(namespace)-7"
        #expect(!TemporaryFile.isAbandoned(alive, modified: now, now: now, isAlive: { _ in true }))
        #expect(TemporaryFile.isAbandoned(alive, modified: now, now: now, isAlive: { _ in false }))
        // Another namespace's process ids mean nothing here: only age tells.
        let foreign = ".hoard-tmp-42-\(String(TemporaryFile.namespace &+ 1, radix: 16))-7"
        #expect(!TemporaryFile.isAbandoned(foreign, modified: now, now: now, isAlive: { _ in false }))
        #expect(TemporaryFile.isAbandoned(foreign, modified: 0, now: now, isAlive: { _ in true }))
        // An earlier release's name, `.hoard-tmp-<pid>-<n>`.
        #expect(TemporaryFile.isAbandoned(".hoard-tmp-42-7", modified: now, now: now, isAlive: { _ in false }))
        #expect(!TemporaryFile.isAbandoned(".hoard-tmp-42-7", modified: now, now: now, isAlive: { _ in true }))
    }
}

extension DiskRead where Value == String {
    /// The value found, if any.
    var foundValue: String? {
        if case .found(let value, _) = self { return value.value }
        return nil
    }
}
