import Foundation
import Testing

@testable import Hoard

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The container is private, links planted in it are never followed, and
/// temporary files never clobber what is already there.
///
/// The planted files hold content the cache would accept if it followed the link (a valid entry for
/// the key, a valid index), so that following one would show as a wrong value, not just as a read.
@Suite(.timeLimit(.minutes(10)))
struct SecurityTests {
    init() { TestLog.install() }

    @Test func theContainerAndEverythingInItAreOwnerOnly() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().build()
        cache["k"] = "v"
        await cache.flush()
        #expect(RawFiles.permissions(folder.container().path) == 0o700)
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.container().path)
        #expect(Set(names).isSuperset(of: [ContainerFile.index, ContainerFile.lock, ContainerFile.manifest]))
        #expect(names.count == 4)
        for name in names {
            #expect(RawFiles.permissions(folder.container().appendingPathComponent(name).path) == 0o600, "\(name)")
        }
    }

    /// Where the link is found.
    enum Discovery: String, CaseIterable, Sendable {
        /// Planted while no cache is open, under the name of an entry the index lists.
        case indexedEntry
        /// Planted while no cache is open and the index is gone: found while the index is rebuilt.
        case rebuild
        /// Planted under an open cache, in place of an entry it has read before.
        case openCache
    }

    /// What the link points to.
    enum Target: String, CaseIterable, Sendable {
        /// A file outside the container holding a valid entry for the key.
        case forgedEntry
        /// A folder outside the container.
        case folder
    }

    @Test(arguments: Discovery.allCases, Target.allCases)
    func aLinkAtAnEntryNameIsNeitherReadNorWrittenThrough(discovery: Discovery, target: Target) async throws {
        let folder = TemporaryDirectory()
        let outside = folder.url.appendingPathComponent("outside")
        let forged = EntryFormat.encode(key: "k", payload: Data("planted".utf8), schemaVersion: 0, expiresAt: .never)
        switch target {
        case .forgedEntry: try RawFiles.write(forged, to: outside.path)
        case .folder:
            try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: false)
            try RawFiles.write(forged, to: outside.appendingPathComponent("inside").path)
        }
        let entry = folder.container().appendingPathComponent(DiskKey("k").fileName).path
        func open() throws -> Cache<String> { try folder.stringBuilder().maxRamCount(0).build(sharingStore: false) }
        var writer: Cache<String>? = try open()
        writer?["k"] = "genuine"
        await writer?.flush()
        #expect(writer?["k"] == "genuine")
        if discovery != .openCache { writer = nil }  // closed: no cache is open while the link is planted
        if discovery == .rebuild {
            try FileManager.default.removeItem(at: folder.container().appendingPathComponent(ContainerFile.index))
        }
        try FileManager.default.removeItem(atPath: entry)
        try FileManager.default.createSymbolicLink(atPath: entry, withDestinationPath: outside.path)
        let cache = try writer ?? open()

        #expect(cache["k"] == nil)  // not "planted"
        #expect(!RawFiles.exists(entry))  // the link is removed, not its target
        cache["k"] = "rewritten"
        await cache.flush()
        #expect(cache["k"] == "rewritten")
        #expect(RawFiles.kind(entry) == S_IFREG)
        cache.removeValue(forKey: "k")
        await cache.flush()
        #expect(!RawFiles.exists(entry))
        // The target was never written or removed.
        switch target {
        case .forgedEntry: #expect(try RawFiles.read(outside.path) == forged)
        case .folder: #expect(try RawFiles.read(outside.appendingPathComponent("inside").path) == forged)
        }
    }

    @Test func aLinkAtTheIndexNameIsNeitherReadNorWrittenThrough() async throws {
        let folder = TemporaryDirectory()
        do {
            let cache = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
            cache["real"] = "value"
            await cache.flush()
        }
        // A valid index listing a key that exists nowhere, kept outside.
        let forgedIndex = DiskIndexFile.encode([
            DiskIndexFile.Record(
                digest: DiskKey("real").digest,
                count: 1_000,
                info: DiskEntryInfo(size: 1)
            )
        ])
        let outside = folder.url.appendingPathComponent("outside-index")
        try RawFiles.write(forgedIndex, to: outside.path)
        let index = folder.container().appendingPathComponent(ContainerFile.index)
        try FileManager.default.removeItem(at: index)
        try FileManager.default.createSymbolicLink(at: index, withDestinationURL: outside)

        let cache = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        #expect(cache.allKeys == ["real"])
        #expect(cache["real"] == "value")
        cache["other"] = "value"
        await cache.flush()
        #expect(RawFiles.kind(index.path) == S_IFREG)
        #expect(try RawFiles.read(outside.path) == forgedIndex)
    }

    @Test func aHardLinkAtAnEntryNameIsReplacedNotWrittenThrough() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().maxRamCount(0).build()
        cache["k"] = "genuine"
        await cache.flush()
        let entry = folder.container().appendingPathComponent(DiskKey("k").fileName).path
        let outside = folder.url.appendingPathComponent("outside").path
        let original = try RawFiles.read(entry)
        try FileManager.default.moveItem(atPath: entry, toPath: outside)
        try FileManager.default.linkItem(atPath: outside, toPath: entry)
        cache["k"] = "rewritten"
        await cache.flush()
        #expect(try RawFiles.read(outside) == original)
        cache.removeValue(forKey: "k")
        await cache.flush()
        #expect(!RawFiles.exists(entry))
        #expect(try RawFiles.read(outside) == original)
    }

    /// The temporary file is opened with `O_EXCL | O_NOFOLLOW`: whatever already has its name (a file,
    /// a link to a file outside) is left alone, and the write fails instead.
    @Test(arguments: ["file", "link"])
    func aTemporaryNameThatIsTakenIsNeverClobbered(occupant: String) throws {
        let folder = TemporaryDirectory()
        var log = DeferredLog()
        let directory = try Directory(creatingAt: folder.container(), log: &log)
        let temporary = folder.container().appendingPathComponent(ContainerFile.temporaryPrefix + "taken").path
        let outside = folder.url.appendingPathComponent("outside").path
        let planted: [UInt8] = Array("planted".utf8)
        switch occupant {
        case "file": try RawFiles.write(planted, to: temporary)
        default:
            try RawFiles.write(planted, to: outside)
            try FileManager.default.createSymbolicLink(atPath: temporary, withDestinationPath: outside)
        }
        #expect(throws: CacheError.FileError.self) {
            try directory.writeAtomically(
                Array("new".utf8),
                to: "entry",
                through: ContainerFile.temporaryPrefix + "taken"
            )
        }
        #expect(!RawFiles.exists(folder.container().appendingPathComponent("entry").path))
        if occupant == "file" {
            #expect(try RawFiles.read(temporary) == planted)
        } else {
            #expect(RawFiles.kind(temporary) == S_IFLNK)
            #expect(try RawFiles.read(outside) == planted)
        }
        // A free name works.
        try directory.writeAtomically(Array("new".utf8), to: "entry", through: ContainerFile.temporaryPrefix + "free")
        #expect(try RawFiles.read(folder.container().appendingPathComponent("entry").path) == Array("new".utf8))
        #expect(
            !RawFiles.exists(folder.container().appendingPathComponent(ContainerFile.temporaryPrefix + "free").path)
        )
    }

    /// Opening a container sweeps names with the temporary prefix: a link goes, never its target; a
    /// folder goes with what it holds, the links inside it removed, never followed.
    @Test func sweepingTemporaryNamesRemovesLinksNotTheirTargets() async throws {
        let folder = TemporaryDirectory()
        _ = try folder.stringBuilder().build(sharingStore: false)
        let container = folder.container()
        let outsideFile = folder.url.appendingPathComponent("outside-file").path
        let outsideFolder = folder.url.appendingPathComponent("outside-folder")
        try RawFiles.write(Array("keep".utf8), to: outsideFile)
        try FileManager.default.createDirectory(at: outsideFolder, withIntermediateDirectories: false)
        try RawFiles.write(Array("keep".utf8), to: outsideFolder.appendingPathComponent("inside").path)
        let prefix = ContainerFile.temporaryPrefix
        try FileManager.default.createSymbolicLink(
            atPath: container.appendingPathComponent(prefix + "to-file").path,
            withDestinationPath: outsideFile
        )
        try FileManager.default.createSymbolicLink(
            atPath: container.appendingPathComponent(prefix + "to-folder").path,
            withDestinationPath: outsideFolder.path
        )
        let plantedFolder = container.appendingPathComponent(prefix + "folder")
        try FileManager.default.createDirectory(
            at: plantedFolder.appendingPathComponent("nested"),
            withIntermediateDirectories: true
        )
        try RawFiles.write(Array("ours".utf8), to: plantedFolder.appendingPathComponent("nested/file").path)
        try FileManager.default.createSymbolicLink(
            atPath: plantedFolder.appendingPathComponent("nested/to-folder").path,
            withDestinationPath: outsideFolder.path
        )
        try FileManager.default.createSymbolicLink(
            atPath: plantedFolder.appendingPathComponent("to-file").path,
            withDestinationPath: outsideFile
        )

        let cache = try folder.stringBuilder().build(sharingStore: false)
        #expect(cache.diskCount == 0)
        #expect(!RawFiles.exists(container.appendingPathComponent(prefix + "to-file").path))
        #expect(!RawFiles.exists(container.appendingPathComponent(prefix + "to-folder").path))
        #expect(try RawFiles.read(outsideFile) == Array("keep".utf8))
        #expect(try RawFiles.read(outsideFolder.appendingPathComponent("inside").path) == Array("keep".utf8))
        #expect(!RawFiles.exists(plantedFolder.path))
        let left = try FileManager.default.contentsOfDirectory(atPath: container.path)
        #expect(Set(left) == [ContainerFile.index, ContainerFile.lock, ContainerFile.manifest])
    }
}
