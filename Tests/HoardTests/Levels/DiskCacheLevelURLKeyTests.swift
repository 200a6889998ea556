import Dispatch
import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// A disk level with `URL` keys stores each by its `absoluteString`: two URLs that differ by `==`
/// but not by that string are one key, for the adapters over the level too.
@Suite struct DiskCacheLevelURLKeyTests {
    /// Holds the first value's encoding until the second value is encoded, so that a batch set that
    /// made both sets at once would land the first one last.
    struct HoldingSerializer: CacheSerializer {
        let secondEncoded = DispatchSemaphore(value: 0)

        func serialize(_ value: String) throws -> Data {
            if value == "first" { _ = secondEncoded.wait(timeout: .now() + 600) }
            if value == "second" { secondEncoded.signal() }
            return Data(value.utf8)
        }

        func deserialize(_ data: Data) throws -> String { String(decoding: data, as: UTF8.self) }
    }

    @Test func aBatchSetOfTwoURLsOfOneAbsoluteStringKeepsTheLaterValue() async throws {
        let directory = TemporaryDirectory()
        let level = DiskCacheLevel<URL, String>(
            directory: directory.container(),
            capacity: 10,
            serializer: HoldingSerializer()
        )
        let base = try #require(URL(string: "https://example.com/a/"))
        let relative = try #require(URL(string: "b", relativeTo: base))
        let absolute = try #require(URL(string: "https://example.com/a/b"))
        try #require(relative != absolute)
        try #require(relative.absoluteString == absolute.absoluteString)

        try await level.allBatch().set(["first", "second"], forKey: [relative, absolute])
        await level.flush()
        #expect(try await level.get(relative) == "second")
        #expect(try await level.get(absolute) == "second")
        withExtendedLifetime(directory) {}
    }
}
