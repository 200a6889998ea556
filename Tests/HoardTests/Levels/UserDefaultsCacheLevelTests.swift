import Foundation
import Testing

@testable import Hoard

/// Tests for `UserDefaultsCacheLevel`; each test owns a suite with a unique name and removes it.
@Suite struct UserDefaultsCacheLevelTests {
    struct Settings: Codable, Sendable, Equatable {
        var theme: String
        var fontSize: Int
    }

    /// Runs `body` with a fresh suite name, then removes the suite and its file.
    func withSuite(_ body: (String) async throws -> Void) async rethrows {
        let suiteName = "hoard.tests.\(UUID().uuidString)"
        defer { UserDefaults.standard.removePersistentDomain(forName: suiteName) }
        try await body(suiteName)
    }

    @Test func setGetRemove() async throws {
        try await withSuite { suiteName in
            let level = UserDefaultsCacheLevel<String, Settings>(suiteName: suiteName)
            let settings = Settings(theme: "dark", fontSize: 14)
            try await level.set(settings, forKey: "main")
            #expect(try await level.get("main") == settings)
            try await level.removeValue(forKey: "main")
            await #expect(throws: CacheError.notFound) { try await level.get("main") }
        }
    }

    @Test func missThrowsNotFound() async throws {
        await withSuite { suiteName in
            let level = UserDefaultsCacheLevel<Int, String>(suiteName: suiteName)
            await #expect(throws: CacheError.notFound) { try await level.get(7) }
        }
    }

    @Test func valuesOutliveTheLevel() async throws {
        try await withSuite { suiteName in
            try await UserDefaultsCacheLevel<Int, String>(suiteName: suiteName).set("seven", forKey: 7)
            let reopened = UserDefaultsCacheLevel<Int, String>(suiteName: suiteName)
            #expect(try await reopened.get(7) == "seven")
        }
    }

    @Test func clearLeavesForeignKeysAndOtherNamespacesAlone() async throws {
        try await withSuite { suiteName in
            let defaults = try #require(UserDefaults(suiteName: suiteName))
            defaults.set("mine", forKey: "foreign")
            let level = UserDefaultsCacheLevel<String, Int>(suiteName: suiteName)
            let other = UserDefaultsCacheLevel<String, Int>(suiteName: suiteName, namespace: "other")
            try await level.set(1, forKey: "a")
            try await level.set(2, forKey: "b")
            try await other.set(3, forKey: "a")
            await level.clear()
            await #expect(throws: CacheError.notFound) { try await level.get("a") }
            await #expect(throws: CacheError.notFound) { try await level.get("b") }
            #expect(try await other.get("a") == 3)
            #expect(UserDefaults(suiteName: suiteName)?.string(forKey: "foreign") == "mine")
        }
    }

    @Test func anUndecodableValueIsAMissAndIsRemoved() async throws {
        try await withSuite { suiteName in
            let defaults = try #require(UserDefaults(suiteName: suiteName))
            defaults.set(Data("not json".utf8), forKey: "hoard:broken")
            let level = UserDefaultsCacheLevel<String, Settings>(suiteName: suiteName)
            await #expect(throws: CacheError.notFound) { try await level.get("broken") }
            #expect(defaults.object(forKey: "hoard:broken") == nil)
        }
    }

    @Test func nestedNamespacesNeverShareAKeyAndClearOnlyTheirOwn() async throws {
        try await withSuite { suiteName in
            let outer = UserDefaultsCacheLevel<String, String>(suiteName: suiteName, namespace: "tests")
            let inner = UserDefaultsCacheLevel<String, String>(suiteName: suiteName, namespace: "tests.fallback")
            let colon = UserDefaultsCacheLevel<String, String>(suiteName: suiteName, namespace: "tests:fallback")
            try await outer.set("outer", forKey: "fallback.other")
            try await inner.set("inner", forKey: "other")
            try await outer.set("outer colon", forKey: "fallback:other")
            try await colon.set("colon", forKey: "other")
            #expect(try await outer.get("fallback.other") == "outer")
            #expect(try await inner.get("other") == "inner")
            #expect(try await outer.get("fallback:other") == "outer colon")
            #expect(try await colon.get("other") == "colon")
            await outer.clear()
            await #expect(throws: CacheError.notFound) { try await outer.get("fallback.other") }
            await #expect(throws: CacheError.notFound) { try await outer.get("fallback:other") }
            #expect(try await inner.get("other") == "inner")
            #expect(try await colon.get("other") == "colon")
        }
    }

    @Test func emptyKeysAndKeysWithTheSeparatorAreKeysLikeAnyOther() async throws {
        try await withSuite { suiteName in
            let level = UserDefaultsCacheLevel<String, String>(suiteName: suiteName, namespace: "")
            let other = UserDefaultsCacheLevel<String, String>(suiteName: suiteName, namespace: ":")
            for key in ["", ":", "::", "a:b", "%3A", "%"] {
                try await level.set("v\(key)", forKey: key)
            }
            try await other.set("other", forKey: "")
            for key in ["", ":", "::", "a:b", "%3A", "%"] {
                #expect(try await level.get(key) == "v\(key)")
            }
            #expect(try await other.get("") == "other")
            await level.clear()
            #expect(try await other.get("") == "other")
        }
    }
}
