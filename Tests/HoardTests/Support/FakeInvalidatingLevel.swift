import Foundation
import HoardTestSupport

@testable import Hoard

/// A shared level in memory that announces invalidations when the test says so, and whose next read
/// or write can be held at a gate: for the coherence tests that need exact interleavings.
final class FakeInvalidatingLevel: InvalidatingCacheLevel, ExpiringCacheLevel, Sendable {
    let store = FakeSharedLevel()
    private let state = Protected(
        (
            handler: (@Sendable (CacheInvalidation) -> Void)?.none, heldGet: Gate?.none, heldSet: Gate?.none,
            getsStarted: 0, setsStarted: 0, refusal: String?.none
        )
    )

    /// Makes the next subscription fail as a server that cannot track would.
    func refuse(_ reason: String) { state.withLock { $0.refusal = reason } }

    /// Holds the next read until the returned gate opens; ``getsStarted`` counts the reads begun.
    func holdNextGet() -> Gate {
        let gate = Gate()
        state.withLock { $0.heldGet = gate }
        return gate
    }

    /// Holds the next write until the returned gate opens; ``setsStarted`` counts the writes begun.
    func holdNextSet() -> Gate {
        let gate = Gate()
        state.withLock { $0.heldSet = gate }
        return gate
    }

    var getsStarted: Int { state.withLock { $0.getsStarted } }
    var setsStarted: Int { state.withLock { $0.setsStarted } }

    /// Delivers an event to the subscriber, on the caller's thread (as the level's own thread would).
    func announce(_ invalidation: CacheInvalidation) {
        state.withLock { $0.handler }?(invalidation)
    }

    func subscribeToInvalidations(
        _ handler: @escaping @Sendable (CacheInvalidation) -> Void
    ) throws -> any InvalidationSubscription {
        if let refusal = state.withLock({ $0.refusal }) { throw CacheError.invalidConfiguration(refusal) }
        state.withLock { $0.handler = handler }
        return Unsubscribe(level: self)
    }

    private struct Unsubscribe: InvalidationSubscription {
        let level: FakeInvalidatingLevel
        func cancel() { level.state.withLock { $0.handler = nil } }
    }

    func get(_ key: String) async throws -> Data {
        let gate = state.withLock { state -> Gate? in
            state.getsStarted += 1
            defer { state.heldGet = nil }
            return state.heldGet
        }
        // The read happens now; only its answer is held, as a slow network would.
        let result: Result<Data, any Error>
        do {
            result = .success(try await store.get(key))
        } catch {
            result = .failure(error)
        }
        try await gate?.wait()
        return try result.get()
    }

    func set(_ value: Data, forKey key: String) async throws {
        try await set(value, forKey: key, expiresAt: nil)
    }

    func set(_ value: Data, forKey key: String, expiresAt: Date?) async throws {
        let gate = state.withLock { state -> Gate? in
            state.setsStarted += 1
            defer { state.heldSet = nil }
            return state.heldSet
        }
        try await gate?.wait()
        try await store.set(value, forKey: key, expiresAt: expiresAt)
    }

    func removeValue(forKey key: String) async throws { try await store.removeValue(forKey: key) }
    func clear() async { await store.clear() }
    func onMemoryWarning() {}
}
