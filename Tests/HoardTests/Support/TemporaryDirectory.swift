import Foundation

@testable import Hoard

/// A fresh folder for one test, removed when the value is deinitialized, and again when the test
/// process exits.
///
/// Swift may release a value at its last use rather than at the end of its scope, so a test's cache
/// can go on writing (its index on close, a queued entry) after the folder was removed, and so
/// recreate it. The second removal, at exit, keeps such folders from piling up in `/tmp`.
final class TemporaryDirectory: Sendable {
    let url: URL

    convenience init() { self.init(name: "HoardTests-\(UUID().uuidString)") }

    /// A folder for the child process of an exit test, which may die by a trap before it removes
    /// anything: its parent, the test process, removes it with ``removeExitTestFolders()``.
    static func forExitTest() -> TemporaryDirectory {
        TemporaryDirectory(name: "\(exitTestPrefix(parent: getppid()))\(getpid())-\(UUID().uuidString)")
    }

    /// Removes the folders that the children of this process's exit tests made with
    /// ``forExitTest()``, once those children have exited (another exit test's may still run).
    static func removeExitTestFolders() {
        let parent = FileManager.default.temporaryDirectory
        let prefix = exitTestPrefix(parent: getpid())
        for name in (try? FileManager.default.contentsOfDirectory(atPath: parent.path)) ?? []
        where name.hasPrefix(prefix) {
            guard let child = pid_t(name.dropFirst(prefix.count).prefix { $0 != "-" }),
                kill(child, 0) != 0 && errno == ESRCH
            else { continue }
            try? FileManager.default.removeItem(at: parent.appendingPathComponent(name))
        }
    }

    private static func exitTestPrefix(parent: pid_t) -> String { "HoardTests-exit-\(parent)-" }

    private init(name: String) {
        let made = FileManager.default.temporaryDirectory.appendingPathComponent(name, isDirectory: true)
        try? FileManager.default.createDirectory(at: made, withIntermediateDirectories: true)
        // The real path, every symbolic link resolved, as the cache reports it in its messages: on
        // Apple platforms the temporary folder is under /var, a link to /private/var.
        if let resolved = realpath(made.path, nil) {
            url = URL(fileURLWithPath: String(cString: resolved), isDirectory: true)
            free(resolved)
        } else {
            url = made
        }
        removedAtExit.add(url)
    }

    deinit {
        try? FileManager.default.removeItem(at: url)
    }

    /// The folder a container of that name gets.
    func container(_ name: String = "test") -> URL { url.appendingPathComponent(name, isDirectory: true) }

    /// Every path below the folder, relative to it, sorted.
    func allPaths() -> [String] {
        guard let enumerator = FileManager.default.enumerator(atPath: url.path) else { return [] }
        return enumerator.compactMap { $0 as? String }.sorted()
    }

    /// The names of the entry files in a container.
    func entryFiles(in container: String = "test") -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: self.container(container).path)) ?? []
        return names.filter { ContainerFile.isEntryName($0) }.sorted()
    }

    /// A builder for `Data` values in a container of this folder.
    func dataBuilder(_ name: String = "test") -> CacheBuilder<Data> {
        CacheBuilder<Data>(serializer: DataSerializer()).containerName(name).directory(url)
    }

    /// A builder for `String` values in a container of this folder.
    func stringBuilder(_ name: String = "test") -> CacheBuilder<String> {
        CacheBuilder<String>(serializer: StringSerializer()).containerName(name).directory(url)
    }
}

/// Every folder a `TemporaryDirectory` made in this process, removed when the process exits.
private let removedAtExit = FoldersRemovedAtExit()

private final class FoldersRemovedAtExit: @unchecked Sendable {
    private let lock = NSLock()
    private var urls: [URL] = []  // guarded by `lock`

    init() {
        atexit { removedAtExit.removeAll() }
    }

    func add(_ url: URL) {
        lock.withLock { urls.append(url) }
    }

    func removeAll() {
        for url in lock.withLock({ urls }) {
            try? FileManager.default.removeItem(at: url)
        }
    }
}
