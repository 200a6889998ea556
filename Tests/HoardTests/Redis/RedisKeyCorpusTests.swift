import Foundation
import HoardTestSupport
import Testing

@testable import Hoard
@testable import HoardRedis

/// One key is one key at every level, the shared one included.
///
/// Spellings that Swift's `==` treats as one string (`"\u{E9}"` and `"e\u{301}"`) are one Redis key,
/// as they are one memory entry and one file, whichever spelling a level, a cache or another instance
/// uses. The hostile-key corpus of ``KeyCorpusTests`` goes through memory, disk, the shared level and
/// two instances.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason), .timeLimit(.minutes(10)))
struct RedisKeyCorpusTests {
    init() { TestLog.install() }

    /// The UTF-8 bytes of `string`'s NFC form.
    static func nfc(_ string: String) -> [UInt8] { Array(string.canonicalKey.utf8) }

    /// The names of the keys the server holds under `level`'s namespace.
    static func serverKeys(_ level: RedisCacheLevel) async throws -> [[UInt8]] {
        var pattern = nfc(level.namespace)
        pattern += Array(":*".utf8)
        var names: [[UInt8]] = []
        var cursor = "0"
        repeat {
            var scan = RESPCommand("SCAN", arguments: 5)
            scan.append(cursor)
            scan.append("MATCH")
            scan.append(pattern)
            scan.append("COUNT")
            scan.append(1000)
            guard case .array(let parts) = try await level.send(scan), parts.count == 2,
                let next = parts[0].bytes, case .array(let keys) = parts[1]
            else { throw TestServerError("SCAN gave an unexpected reply") }
            names += keys.compactMap(\.bytes).map { Array($0) }
            cursor = String(decoding: next, as: UTF8.self)
        } while cursor != "0"
        return names
    }

    @Test func aValueSetUnderOneSpellingIsFoundUnderEveryOther() async throws {
        let server = try RedisTestServer.required()
        let namespace = "nfc-caf\u{E9}-\(UUID().uuidString)"
        let level = try RedisCacheLevel.patient(url: server.url, namespace: namespace)
        try await level.set(Data("v".utf8), forKey: "e\u{301}")
        #expect(try await level.get("\u{E9}") == Data("v".utf8))
        #expect(try await level.values(forKeys: ["\u{E9}", "e\u{301}"]) == [Data("v".utf8), Data("v".utf8)])
        #expect(try await level.timeToLive(forKey: "\u{E9}") == nil)
        // The server holds one key, named by the NFC bytes of the namespace and the key.
        #expect(try await Self.serverKeys(level) == [Self.nfc("\(namespace):\u{E9}")])

        // A namespace spelled the other way is the same namespace.
        let decomposed = try RedisCacheLevel.patient(
            url: server.url,
            namespace: namespace.decomposedStringWithCanonicalMapping
        )
        #expect(try await decomposed.get("e\u{301}") == Data("v".utf8))
        try await decomposed.removeValue(forKey: "\u{E9}")
        await #expect(throws: CacheError.notFound) { try await level.get("e\u{301}") }
        try await level.set(Data("w".utf8), forKey: "\u{C5}")
        await decomposed.clear()
        #expect(try await Self.serverKeys(level).isEmpty)
    }

    @Test func everyKeyOfTheCorpusIsOneKeyInMemoryOnDiskOnTheServerAndInAnotherInstance() async throws {
        let server = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let namespace = "corpus-\(UUID().uuidString)"
        let fetches = Counter()
        func instance(_ container: String) throws -> Cache<String> {
            try folder.stringBuilder(container).maxRamCount(2_000).maxDiskCount(2_000)
                .sharedLevel(try RedisCacheLevel.patient(url: server.url, namespace: namespace))
                .fetcher { key in
                    _ = fetches.increment()
                    return "fetched \(key)"
                }
                .build()
        }
        let classes = KeyCorpusTests.classes
        #expect(classes.contains { $0.count > 1 })
        let first = try instance("a")
        // Each class is saved through every one of its spellings in turn: the last value wins.
        for (index, spellings) in classes.enumerated() {
            for (turn, key) in spellings.enumerated() { try await first.save("value \(index) \(turn)", forKey: key) }
        }
        func latest(_ index: Int) -> String { "value \(index) \(classes[index].count - 1)" }

        // One key per class at every level of the instance that saved them…
        #expect(first.memoryCount == classes.count)
        #expect(first.diskCount == classes.count)
        #expect(Set(first.allKeys).count == classes.count)
        // …and on the server, each under its canonical bytes.
        let raw = try RedisCacheLevel.patient(url: server.url, namespace: namespace)
        let names = try await Self.serverKeys(raw)
        #expect(names.count == classes.count)
        #expect(Set(names) == Set(classes.map { Self.nfc("\(namespace):\($0[0])") }))

        // Another instance reads every spelling from the server, without a fetch: the latest value.
        let second = try instance("b")
        for (index, spellings) in classes.enumerated() {
            for key in spellings {
                let value = try await second.getOrFetch(forKey: key)
                #expect(value == latest(index), "\(KeyCorpusTests.describe(key))")
            }
        }
        #expect(fetches.value == 0)
        #expect(second.memoryCount == classes.count)
        await second.flush()
        #expect(second.diskCount == classes.count)

        // A removal through the first spelling removes the key under every spelling, everywhere.
        for spellings in classes { second.removeValue(forKey: spellings[0]) }
        await second.flush()
        #expect(try await Self.serverKeys(raw).isEmpty)
        let third = try instance("c")
        for spellings in classes {
            let key = try #require(spellings.last)
            #expect(try await third.getOrFetch(forKey: key) == "fetched \(key)", "\(KeyCorpusTests.describe(key))")
        }
        #expect(fetches.value == classes.count)
        withExtendedLifetime((first, folder)) {}
    }

    @Test func aWriteUnderAnotherSpellingReplacesTheOtherInstancesCopy() async throws {
        let server = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let namespace = "nfc-coherent-\(UUID().uuidString)"
        let name = "nfc-\(UUID().uuidString.prefix(8))"
        let writer = try RedisCoherenceTests.coherentCache(
            folder,
            "a",
            port: server.port,
            namespace: namespace,
            clientName: name
        )
        let reader = try RedisCoherenceTests.coherentCache(
            folder,
            "b",
            port: server.port,
            namespace: namespace,
            clientName: name
        )
        #expect(await waitUntil { writer.isCoherent && reader.isCoherent })
        let classes = KeyCorpusTests.classes.filter { $0.count > 1 }
        #expect(classes.count >= KeyCorpusTests.equivalentSpellings.count)
        for spellings in classes {
            let (older, newer) = (spellings[0], spellings[spellings.count - 1])
            let described = KeyCorpusTests.describe(older)
            try await RedisCoherenceTests.save("old", forKey: older, on: writer, heardBy: reader)
            #expect(try await reader.getOrFetch(forKey: newer) == "old", "\(described)")
            #expect(reader.entry(forKey: older)?.value == "old", "\(described)")
            // The invalidation names the server's key; the reader matches it to its copy, whatever
            // spelling that copy was stored under, and its next read finds the new value.
            try await writer.save("new", forKey: newer)
            #expect(await waitUntil { reader.memory?.peek(older)?.value != "old" }, "\(described)")
            #expect(try await reader.getOrFetch(forKey: older) == "new", "\(described)")
        }
    }
}
