import Foundation
import HoardTestSupport

@testable import Hoard

/// A ``FakeInvalidatingLevel`` that also reads many keys in one request, as `MGET` does: it records
/// each request's keys, and can fail them.
final class FakeBatchReadingLevel: InvalidatingCacheLevel, ExpiringCacheLevel, BatchReadingCacheLevel, Sendable {
    let base = FakeInvalidatingLevel()
    private let state = Protected((batches: [[String]](), gets: [String](), failsBatches: false))

    /// The keys of each request of several keys, in the order they came.
    var batches: [[String]] { state.withLock { $0.batches } }

    /// The keys read one at a time, in the order they came.
    var gets: [String] { state.withLock { $0.gets } }

    /// Makes every later request of several keys throw, as a server that went away would.
    func failBatches() { state.withLock { $0.failsBatches = true } }

    func values(forKeys keys: [String]) async throws -> [Data?] {
        let fails = state.withLock { state in
            state.batches.append(keys)
            return state.failsBatches
        }
        if fails { throw CacheError.io("The fake shared level is down.") }
        var values: [Data?] = []
        for key in keys { values.append(try? await base.store.get(key)) }
        return values
    }

    func subscribeToInvalidations(
        _ handler: @escaping @Sendable (CacheInvalidation) -> Void
    ) throws -> any InvalidationSubscription {
        try base.subscribeToInvalidations(handler)
    }

    func get(_ key: String) async throws -> Data {
        state.withLock { $0.gets.append(key) }
        return try await base.get(key)
    }
    func set(_ value: Data, forKey key: String) async throws { try await base.set(value, forKey: key) }
    func set(_ value: Data, forKey key: String, expiresAt: Date?) async throws {
        try await base.set(value, forKey: key, expiresAt: expiresAt)
    }
    func removeValue(forKey key: String) async throws { try await base.removeValue(forKey: key) }
    func clear() async { await base.clear() }
    func onMemoryWarning() {}
}
