import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// A container name is "a plain folder name: no "/", ".." or NUL character", whatever follows the
/// slash: Swift's `contains("/")` compares characters, and `"/\u{301}"` is one character that is
/// not `"/"`, yet its bytes hold a slash, which the file system reads as a folder separator.
@Suite struct ContainerNameSpellingTests {
    @Test(arguments: ["a/\u{301}b", "/\u{301}"])
    func aSlashFollowedByAMarkIsRefused(name: String) throws {
        let folder = TemporaryDirectory()
        #expect(throws: CacheError.invalidConfiguration, "\(name.unicodeScalars.map(\.value))") {
            try folder.stringBuilder(name).build()
        }
        // Nothing was made below the folder: no nested folder for the part before the slash.
        #expect(folder.allPaths().isEmpty, "\(folder.allPaths())")
    }
}
