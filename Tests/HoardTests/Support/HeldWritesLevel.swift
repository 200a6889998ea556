import Foundation
import HoardTestSupport

@testable import Hoard

/// A shared level that passes everything to another one (a Redis level, say), and whose next write
/// can be held at a gate before it reaches it, or after (its answer held): for the tests that need a
/// save's disk write landed while its shared write has not been made yet, or not answered yet.
final class HeldWritesLevel: InvalidatingCacheLevel, Sendable {
    let level: any InvalidatingCacheLevel<String, Data>
    private let state = Protected((heldSet: Gate?.none, heldAnswer: Gate?.none, setsStarted: 0))

    init(_ level: any InvalidatingCacheLevel<String, Data>) {
        self.level = level
    }

    /// Holds the next write until the returned gate opens; ``setsStarted`` counts the writes begun.
    func holdNextSet() -> Gate {
        let gate = Gate()
        state.withLock { $0.heldSet = gate }
        return gate
    }

    /// Holds the answer of the next write, made at once, until the returned gate opens.
    func holdNextSetAnswer() -> Gate {
        let gate = Gate()
        state.withLock { $0.heldAnswer = gate }
        return gate
    }

    var setsStarted: Int { state.withLock { $0.setsStarted } }

    func subscribeToInvalidations(
        _ handler: @escaping @Sendable (CacheInvalidation) -> Void
    ) throws -> any InvalidationSubscription {
        try level.subscribeToInvalidations(handler)
    }

    func get(_ key: String) async throws -> Data {
        try await level.get(key)
    }

    func set(_ value: Data, forKey key: String) async throws {
        let (gate, answer) = state.withLock { state -> (Gate?, Gate?) in
            state.setsStarted += 1
            defer { (state.heldSet, state.heldAnswer) = (nil, nil) }
            return (state.heldSet, state.heldAnswer)
        }
        try await gate?.wait()
        try await level.set(value, forKey: key)
        try await answer?.wait()
    }

    func removeValue(forKey key: String) async throws {
        try await level.removeValue(forKey: key)
    }

    func clear() async {
        await level.clear()
    }

    func onMemoryWarning() {
        level.onMemoryWarning()
    }
}
