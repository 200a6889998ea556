import Foundation
import Testing

@testable import Hoard

#if canImport(Glibc)
import Glibc
#endif

/// Mounting, permissions and the worker's reports for the fault tests.
enum FaultSupport {
    /// Enables a test of file permissions where they can bite: not as root, unless `setpriv` can
    /// run its child process as another user.
    static let permissionsCanBeTested: ConditionTrait = .enabled(
        if: getuid() != 0 || FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"),
        "as root, permissions are only tested where setpriv can drop privileges (Linux)"
    )

    /// Who a permission test's worker runs as, and from where: as root, `nobody`, from a copy of
    /// the worker in `folder` (the build folder may be inside a folder only root can enter);
    /// otherwise this user and the worker where it was built (`nil`, `nil`).
    static func unprivilegedWorker(in folder: TemporaryDirectory) throws -> (user: String?, executable: String?) {
        guard getuid() == 0 else { return (nil, nil) }
        let copy = folder.url.appendingPathComponent("hoard-test-worker").path
        try WorkerProcess.copyExecutable(to: copy)
        return ("nobody", copy)
    }

    static let nobody: uid_t = 65_534
    static let nogroup: gid_t = 65_534

    /// Whether this process may mount a tmpfs (root with `CAP_SYS_ADMIN`, as in this project's CI).
    static let canMountFilesystems: Bool = {
        guard getuid() == 0 else { return false }
        let probe = FileManager.default.temporaryDirectory.appendingPathComponent("HoardTests-mount-\(UUID())")
        guard (try? FileManager.default.createDirectory(at: probe, withIntermediateDirectories: true)) != nil else {
            return false
        }
        defer { try? FileManager.default.removeItem(at: probe) }
        guard (try? mountTmpfs(at: probe.path, size: "64k")) != nil else { return false }
        unmount(probe.path)
        return true
    }()

    // A size-limited tmpfs is Linux's; elsewhere the disk-full test is skipped (mounting fails).
    static func mountTmpfs(at path: String, size: String) throws {
        #if os(Linux)
        guard mount("tmpfs", path, "tmpfs", 0, "size=\(size),mode=0755") == 0 else {
            throw CacheError.FileError(operation: "mount", path: path, errorNumber: errno)
        }
        #else
        throw CacheError.FileError(operation: "mount", path: path, errorNumber: ENOTSUP)
        #endif
    }

    static func remountTmpfs(at path: String, size: String) throws {
        #if os(Linux)
        guard mount("tmpfs", path, "tmpfs", UInt(MS_REMOUNT), "size=\(size),mode=0755") == 0 else {
            throw CacheError.FileError(operation: "mount", path: path, errorNumber: errno)
        }
        #else
        throw CacheError.FileError(operation: "mount", path: path, errorNumber: ENOTSUP)
        #endif
    }

    static func unmount(_ path: String) {
        #if os(Linux)
        umount2(path, Int32(MNT_DETACH))
        #endif
    }

    /// Checks that the container holds `count` entry files, each intact, named by its key, and
    /// holding a payload `isExpected` accepts, and no temporary file.
    static func expectIntactEntries(
        in container: String,
        count: Int,
        sourceLocation: SourceLocation = #_sourceLocation,
        _ isExpected: (String, Data) -> Bool
    ) throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: container)
        #expect(!names.contains { $0.hasPrefix(ContainerFile.temporaryPrefix) }, sourceLocation: sourceLocation)
        let entries = names.filter(ContainerFile.isEntryName)
        #expect(entries.count == count, sourceLocation: sourceLocation)
        for name in entries {
            let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: container + "/" + name)))
            let entry = try #require(
                try? EntryFormat.decode(bytes),
                "\(name) is damaged",
                sourceLocation: sourceLocation
            )
            #expect(DiskKey(entry.key).fileName == name, sourceLocation: sourceLocation)
            #expect(
                isExpected(entry.key, entry.payload),
                "\(entry.key) holds a wrong value",
                sourceLocation: sourceLocation
            )
        }
    }

    /// Expects a worker's fault scenario to have run to `done` with no failed check.
    static func expectPassed(
        _ result: (lines: [String], ending: WorkerProcess.Ending),
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        for line in result.lines where !line.hasPrefix("ok ") && line != "done" {
            Issue.record("worker: \(line)", sourceLocation: sourceLocation)
        }
        #expect(result.lines.last == "done", sourceLocation: sourceLocation)
        #expect(result.lines.count { $0.hasPrefix("ok ") } >= 8, sourceLocation: sourceLocation)
        #expect(result.ending == .exited(0), sourceLocation: sourceLocation)
    }
}
