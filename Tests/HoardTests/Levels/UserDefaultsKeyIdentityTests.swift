import Foundation
import Testing

@testable import Hoard

/// `UserDefaultsCacheLevel` stores a key by its description: keys that `==` makes one but whose
/// descriptions differ (`0.0` and `-0.0`) are two keys there, for the adapters over the level too.
@Suite struct UserDefaultsKeyIdentityTests {
    @Test func aBatchSetOfTwoKeysOfTwoDescriptionsKeepsBothValues() async throws {
        let suiteName = "hoard.tests.\(UUID().uuidString)"
        defer { UserDefaults.standard.removePersistentDomain(forName: suiteName) }
        let level = UserDefaultsCacheLevel<Double, String>(suiteName: suiteName)
        try #require(0.0 == -0.0)
        try #require((0.0).description != (-0.0).description)

        try await level.allBatch().set(["positive", "negative"], forKey: [0.0, -0.0])
        // As a loop of sets leaves them: each in its own key.
        #expect(try await level.get(0.0) == "positive")
        #expect(try await level.get(-0.0) == "negative")
    }
}
