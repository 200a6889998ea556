import Foundation
import HoardTestSupport

@testable import Hoard

/// A ``FakeInvalidatingLevel`` whose next removal, clear or read can be held at a gate before it
/// is made; a held removal can fail once its gate opens.
final class GatedInvalidatingLevel: InvalidatingCacheLevel, ExpiringCacheLevel, Sendable {
    let base = FakeInvalidatingLevel()
    private let state = Protected(
        (removal: Gate?.none, failsRemoval: false, clear: Gate?.none, held: 0, read: Gate?.none, heldReads: 0)
    )

    /// Holds the next read until the returned gate opens; it then reads what the level holds then.
    func holdNextRead() -> Gate {
        let gate = Gate()
        state.withLock { $0.read = gate }
        return gate
    }

    /// How many reads reached a gate.
    var heldReads: Int { state.withLock { $0.heldReads } }

    func holdNextRemoval(failing: Bool = false) -> Gate {
        let gate = Gate()
        state.withLock {
            $0.removal = gate; $0.failsRemoval = failing
        }
        return gate
    }

    func holdNextClear() -> Gate {
        let gate = Gate()
        state.withLock { $0.clear = gate }
        return gate
    }

    /// How many changes reached a gate.
    var heldChanges: Int { state.withLock { $0.held } }

    func subscribeToInvalidations(
        _ handler: @escaping @Sendable (CacheInvalidation) -> Void
    ) throws -> any InvalidationSubscription {
        try base.subscribeToInvalidations(handler)
    }

    func get(_ key: String) async throws -> Data {
        let gate = state.withLock { state -> Gate? in
            defer { state.read = nil }
            if state.read != nil { state.heldReads += 1 }
            return state.read
        }
        try await gate?.wait()
        return try await base.get(key)
    }
    func set(_ value: Data, forKey key: String) async throws { try await base.set(value, forKey: key) }

    func set(_ value: Data, forKey key: String, expiresAt: Date?) async throws {
        try await base.set(value, forKey: key, expiresAt: expiresAt)
    }

    func removeValue(forKey key: String) async throws {
        let (gate, fails) = state.withLock { state -> (Gate?, Bool) in
            defer { (state.removal, state.failsRemoval) = (nil, false) }
            if state.removal != nil { state.held += 1 }
            return (state.removal, state.failsRemoval)
        }
        try await gate?.wait()
        if fails { throw CacheError.io("test: the removal failed", key: key) }
        try await base.removeValue(forKey: key)
    }

    func clear() async {
        let gate = state.withLock { state -> Gate? in
            defer { state.clear = nil }
            if state.clear != nil { state.held += 1 }
            return state.clear
        }
        try? await gate?.wait()
        await base.clear()
    }

    func onMemoryWarning() {}
}
