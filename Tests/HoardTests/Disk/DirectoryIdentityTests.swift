import Foundation
import Testing

@testable import Hoard

/// A container is known to be gone by its identity (device and inode against a fresh `stat` of its
/// path), not by its link count, which APFS never reports as 0 for a folder.
@Suite struct DirectoryIdentityTests {
    @Test func aFolderIsGoneWhenDeletedOrReplacedAndNotOtherwise() throws {
        let folder = TemporaryDirectory()
        var log = DeferredLog()
        let directory = try Directory(creatingAt: folder.container(), log: &log)
        #expect(!directory.isOpenFolderGone)

        // Moved away, and another folder made at its path: the open one still exists, with links.
        let moved = folder.url.appendingPathComponent("moved")
        try FileManager.default.moveItem(at: folder.container(), to: moved)
        try FileManager.default.createDirectory(at: folder.container(), withIntermediateDirectories: false)
        #expect(directory.isOpenFolderGone)

        let again = try Directory(creatingAt: folder.container(), log: &log)
        #expect(!again.isOpenFolderGone)
        try FileManager.default.removeItem(at: folder.container())
        #expect(again.isOpenFolderGone)
    }

    @Test func aWriteIntoAReplacedContainerLandsInTheFolderAtItsPath() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().build()
        cache["before"] = "v"
        await cache.flush()
        // The container is deleted and its path made again by someone else, empty.
        try FileManager.default.removeItem(at: folder.container())
        try FileManager.default.createDirectory(at: folder.container(), withIntermediateDirectories: false)
        cache["after"] = "written after"
        await cache.flush()
        #expect(folder.entryFiles() == [DiskKey("after").fileName])
    }
}
