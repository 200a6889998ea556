import Foundation
import HoardTestSupport
import Testing

@testable import Hoard
@testable import HoardRedis

/// Keys of characters newer than Foundation's normalization tables (see ``NewerUnicodeKeyTests``)
/// are one key on the server too, whichever spelling an instance uses.
@Suite(
    .enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason),
    .enabled(if: "\u{16D68}" == "\u{16D67}\u{16D67}", "the runtime's Unicode data predates Unicode 16"),
    .timeLimit(.minutes(10))
)
struct RedisNewerUnicodeKeyTests {
    init() { TestLog.install() }

    /// Fleets.md: spellings that Swift's `==` treats as one key "are one key on the server, as in
    /// memory and on disk": another instance reads the value from the shared level, without a fetch.
    @Test func anotherInstanceReadsTheValueUnderTheOtherSpellingWithoutAFetch() async throws {
        let server = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let namespace = "unicode16-\(UUID().uuidString)"
        let fetches = Counter()
        func instance(_ container: String) throws -> Cache<String> {
            try folder.stringBuilder(container).maxRamCount(100).maxDiskCount(100)
                .sharedLevel(try RedisCacheLevel.patient(url: server.url, namespace: namespace))
                .fetcher { key in
                    _ = fetches.increment()
                    return "fetched"
                }
                .build()
        }
        let writer = try instance("a")
        let reader = try instance("b")
        for (composed, decomposed) in NewerUnicodeKeyTests.pairs {
            #expect(composed == decomposed)
            try await writer.save("shared", forKey: composed)
            #expect(
                try await reader.getOrFetch(forKey: decomposed) == "shared",
                "\(KeyCorpusTests.describe(decomposed))"
            )
        }
        #expect(fetches.value == 0)
        // One server key per pair, named by the canonical bytes.
        let raw = try RedisCacheLevel.patient(url: server.url, namespace: namespace)
        #expect(try await RedisKeyCorpusTests.serverKeys(raw).count == NewerUnicodeKeyTests.pairs.count)
    }
}
