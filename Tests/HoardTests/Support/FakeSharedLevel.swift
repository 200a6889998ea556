import Foundation
import HoardTestSupport

@testable import Hoard

/// A shared level in memory, for the cache's tests: what it holds, with each value's expiry, the
/// calls it got, and a switch that makes it fail like a server that is down.
final class FakeSharedLevel: ExpiringCacheLevel, Sendable {
    struct Stored: Sendable, Equatable {
        var bytes: Data
        var expiresAt: Date?
    }

    private let state = Protected((values: [String: Stored](), gets: 0, sets: 0, removes: 0, clears: 0, failing: false))

    var values: [String: Stored] { state.withLock { $0.values } }
    var gets: Int { state.withLock { $0.gets } }
    var sets: Int { state.withLock { $0.sets } }
    var removes: Int { state.withLock { $0.removes } }
    var clears: Int { state.withLock { $0.clears } }

    /// Makes every call fail (or work again).
    func setFailing(_ failing: Bool) { state.withLock { $0.failing = failing } }

    /// Puts bytes in the level as another instance would.
    func plant(_ bytes: Data, forKey key: String, expiresAt: Date? = nil) {
        state.withLock { $0.values[key] = Stored(bytes: bytes, expiresAt: expiresAt) }
    }

    private func check() throws {
        if state.withLock({ $0.failing }) { throw CacheError.io("The fake shared level is down.") }
    }

    func get(_ key: String) async throws -> Data {
        state.withLock { $0.gets += 1 }
        try check()
        guard let stored = state.withLock({ $0.values[key] }) else { throw CacheError.notFound(key: key) }
        return stored.bytes
    }

    func set(_ value: Data, forKey key: String) async throws {
        try await set(value, forKey: key, expiresAt: nil)
    }

    func set(_ value: Data, forKey key: String, expiresAt: Date?) async throws {
        try check()
        state.withLock {
            $0.sets += 1
            $0.values[key] = Stored(bytes: value, expiresAt: expiresAt)
        }
    }

    func removeValue(forKey key: String) async throws {
        try check()
        state.withLock {
            $0.removes += 1
            $0.values[key] = nil
        }
    }

    func clear() async {
        state.withLock {
            $0.clears += 1
            $0.values = [:]
        }
    }

    func onMemoryWarning() {}
}
