import Foundation

extension FileProtectionType {
    /// Sets this class on the folder at `path`, so that the files created in it take it; does
    /// nothing where data protection does not exist.
    ///
    /// The class is set on the container folder when it is opened, and every file created in it (the
    /// entries, the index) takes the folder's class. A cache read while its files are locked away
    /// (with `.complete`, while the device is locked) finds them unreadable: reads are misses and
    /// writes fail, as for any other file-system fault.
    ///
    /// - Throws: The file manager's error when the class cannot be set.
    func protect(folderAt path: String) throws {
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
        try FileManager.default.setAttributes([.protectionKey: self], ofItemAtPath: path)
        #endif
    }
}
