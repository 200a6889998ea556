import Foundation

/// A new temporary folder for the containers the demo does not keep, removed when the demo is done.
///
/// Only the `articles` container stays between runs (CONTRIBUTING.md says so). The other steps build
/// their caches in here, and each step flushes its caches before it returns, so that no background
/// write can create a container again once the folder is gone. The path is never printed: it
/// differs on every run.
struct ScratchFolder {
    /// The folder; it exists until ``remove()``.
    let url: URL

    /// Creates an empty folder, readable by this user only, in the temporary directory.
    ///
    /// - Throws: The file system's error when the folder cannot be created.
    init() throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("hoard-demo-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(
            at: url,
            withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
    }

    /// Removes the folder and everything in it.
    ///
    /// - Throws: The file system's error when the folder cannot be removed.
    func remove() throws {
        try FileManager.default.removeItem(at: url)
    }
}
