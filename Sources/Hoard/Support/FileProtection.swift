import Foundation

/// The data-protection class of a cache's files on iOS, tvOS, watchOS and visionOS: when the
/// system lets them be read, relative to the device being locked.
///
/// ```swift
/// let inbox = try CacheBuilder<Message>()
///     .containerName("inbox")
///     .fileProtection(.completeUntilFirstUserAuthentication)   // readable in the background
///     .build()
/// ```
/// The class is set on the container folder when it is opened, and every file created in it (the
/// entries, the index) takes the folder's class. Without ``CacheBuilder/fileProtection(_:)`` the
/// files take the app's default class. On macOS and Linux there is no such protection: the option
/// does nothing there.
///
/// A cache read while its files are locked away (with ``complete``, while the device is locked)
/// finds them unreadable: reads are misses and writes fail, as for any other file-system fault.
public enum FileProtection: String, Sendable, Hashable, CaseIterable {
    /// No protection: readable whenever the device is on.
    case none
    /// Readable only while the device is unlocked.
    case complete
    /// Files open when the device locks stay usable; new ones can be created while locked.
    case completeUnlessOpen
    /// Readable once the user has unlocked the device after it started: what background work needs.
    case completeUntilFirstUserAuthentication
}

extension FileProtection {
    /// Sets this class on the folder at `path`, so that the files created in it take it; does
    /// nothing where data protection does not exist.
    ///
    /// - Throws: The file manager's error when the class cannot be set.
    func apply(toFolderAt path: String) throws {
        #if os(iOS) || os(tvOS) || os(watchOS) || os(visionOS)
        let type: FileProtectionType =
            switch self {
            case .none: .none
            case .complete: .complete
            case .completeUnlessOpen: .completeUnlessOpen
            case .completeUntilFirstUserAuthentication: .completeUntilFirstUserAuthentication
            }
        try FileManager.default.setAttributes([.protectionKey: type], ofItemAtPath: path)
        #endif
    }
}
