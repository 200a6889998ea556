import Foundation
import Testing

@testable import Hoard

/// `UserDefaultsCacheLevel` and the keys Swift compares by canonical equivalence.
///
/// `UserDefaults` compares its keys code unit by code unit, not as Swift's `==` does; and Swift's
/// `hasPrefix` compares characters, so a key that starts with a combining mark (or a zero-width
/// joiner) glues that mark onto the namespace's colon.
@Suite struct UserDefaultsKeySpellingTests {
    /// Runs `body` with a fresh suite name, then removes the suite and its file.
    func withSuite(_ body: (String) async throws -> Void) async rethrows {
        let suiteName = "hoard.tests.\(UUID().uuidString)"
        defer { UserDefaults.standard.removePersistentDomain(forName: suiteName) }
        try await body(suiteName)
    }

    /// `clear()` "removes every value of this level's namespace": keys that start with a mark that
    /// joins the character before it too.
    @Test func clearRemovesKeysThatStartWithACombiningMark() async throws {
        try await withSuite { suiteName in
            let level = UserDefaultsCacheLevel<String, Int>(suiteName: suiteName)
            let keys = ["\u{301}", "\u{301}x", "\u{200D}\u{1F525}", "\u{FE0F}", "plain"]
            for (index, key) in keys.enumerated() { try await level.set(index, forKey: key) }
            await level.clear()
            for key in keys {
                await #expect(throws: CacheError.notFound, "\(key.unicodeScalars.map(\.value)) survived clear()") {
                    try await level.get(key)
                }
            }
        }
    }

    /// Two spellings that Swift's `==` treats as one key are one key in this level too, as in memory,
    /// on disk and on the shared level (DESIGN.md: every level that compares bytes uses the key's
    /// canonical form).
    @Test func equivalentSpellingsAreOneKey() async throws {
        try await withSuite { suiteName in
            let level = UserDefaultsCacheLevel<String, Int>(suiteName: suiteName)
            #expect("caf\u{E9}" == "cafe\u{301}")
            try await level.set(1, forKey: "caf\u{E9}")
            #expect(try await level.get("cafe\u{301}") == 1)
            try await level.removeValue(forKey: "cafe\u{301}")
            await #expect(throws: CacheError.notFound) { try await level.get("caf\u{E9}") }
        }
    }

    /// "No two (namespace, key) pairs give one stored key": a namespace whose colon a combining mark
    /// follows has that colon escaped too (Foundation's `replacingOccurrences` matches characters,
    /// and `":\u{301}"` is one character, not a colon).
    @Test func aColonFollowedByACombiningMarkInTheNamespaceIsEscaped() async throws {
        try await withSuite { suiteName in
            let outer = UserDefaultsCacheLevel<String, Int>(suiteName: suiteName, namespace: "a")
            let inner = UserDefaultsCacheLevel<String, Int>(suiteName: suiteName, namespace: "a:\u{301}")
            try await outer.set(1, forKey: "\u{301}:x")
            await #expect(throws: CacheError.notFound, "another namespace's value") { try await inner.get("x") }
            try await inner.set(2, forKey: "x")
            #expect(try await outer.get("\u{301}:x") == 1)
            await outer.clear()
            #expect(try await inner.get("x") == 2)
        }
    }
}
