import Foundation
import HoardTestSupport

@testable import Hoard

/// A dictionary-backed cache level that counts its calls, and can fail or wait on a gate.
final class RecordingLevel<Key: Hashable & Sendable, Value: Sendable>: CacheLevel, Sendable {
    /// What the level holds and how often each method was called.
    struct State {
        var values: [Key: Value] = [:]
        var gets = 0
        var sets = 0
        var removes = 0
        var clears = 0
        var memoryWarnings = 0
        var cancelledGets = 0
    }

    let state = Protected(State())
    /// Thrown by `get` instead of reading, when set.
    let getError: (any Error)?
    /// Thrown by `set` and `removeValue`, when set.
    let writeError: (any Error)?
    /// Awaited by every `get` before it reads, when set.
    let gate: Gate?

    init(
        _ values: [Key: Value] = [:],
        getError: (any Error)? = nil,
        writeError: (any Error)? = nil,
        gate: Gate? = nil
    ) {
        state.withLock { $0.values = values }
        self.getError = getError
        self.writeError = writeError
        self.gate = gate
    }

    var values: [Key: Value] { state.withLock { $0.values } }
    var gets: Int { state.withLock { $0.gets } }
    var sets: Int { state.withLock { $0.sets } }
    var removes: Int { state.withLock { $0.removes } }
    var clears: Int { state.withLock { $0.clears } }
    var memoryWarnings: Int { state.withLock { $0.memoryWarnings } }
    var cancelledGets: Int { state.withLock { $0.cancelledGets } }

    func get(_ key: Key) async throws -> Value {
        state.withLock { $0.gets += 1 }
        if let gate {
            do {
                try await gate.wait()
            } catch {
                state.withLock { $0.cancelledGets += 1 }
                throw error
            }
        }
        if let getError { throw getError }
        guard let value = state.withLock({ $0.values[key] }) else { throw CacheError.notFound }
        return value
    }

    func set(_ value: Value, forKey key: Key) async throws {
        state.withLock { $0.sets += 1 }
        if let writeError { throw writeError }
        state.withLock { $0.values[key] = value }
    }

    func removeValue(forKey key: Key) async throws {
        state.withLock { $0.removes += 1 }
        if let writeError { throw writeError }
        state.withLock { $0.values[key] = nil }
    }

    func clear() async {
        state.withLock {
            $0.clears += 1
            $0.values.removeAll()
        }
    }

    func onMemoryWarning() {
        state.withLock { $0.memoryWarnings += 1 }
    }
}
