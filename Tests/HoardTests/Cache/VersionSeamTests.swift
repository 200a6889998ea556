import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Where `version(_:)` meets a container two processes open with different versions.
@Suite(.timeLimit(.minutes(10)), .validatesCacheInvariants)
struct VersionSeamTests {
    @Test func anEntryOfAnotherVersionIsNeitherReadNorContained() async throws {
        let folder = TemporaryDirectory()
        let older = try folder.stringBuilder().version(1).build()
        let newer = try folder.stringBuilder().version(2).build(sharingStore: false)
        try await newer.save("written by version 2", forKey: "k")
        await older.flush()
        let read = older["k"]
        let contained = older.contains("k")
        let listed = older.allKeys
        #expect(read == nil)
        #expect(!contained, "contains says yes; value(forKey:) says \(String(describing: read))")
        #expect(!listed.contains("k"))
        #expect(newer["k"] == "written by version 2")
    }
}
