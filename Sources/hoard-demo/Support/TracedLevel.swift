import Hoard

/// A level that passes every call to another one and records its gets and sets in a ``LevelTrace``,
/// so that the demo can show which level of a composition answered.
///
/// Writing a level takes the five requirements of `CacheLevel`; this one adds nothing but the trace.
struct TracedLevel<Base: CacheLevel>: CacheLevel {
    typealias Key = Base.Key
    typealias Value = Base.Value

    let base: Base
    /// The level's name in the trace, such as `memory`.
    let name: String
    let trace: LevelTrace

    func get(_ key: Key) async throws -> Value {
        do {
            let value = try await base.get(key)
            trace.record("\(padded(name, 8)) get \"\(key)\" → found")
            return value
        } catch {
            trace.record("\(padded(name, 8)) get \"\(key)\" → miss")
            throw error
        }
    }

    func set(_ value: Value, forKey key: Key) async throws {
        trace.record("\(padded(name, 8)) set \"\(key)\"")
        try await base.set(value, forKey: key)
    }

    func removeValue(forKey key: Key) async throws {
        try await base.removeValue(forKey: key)
    }

    func clear() async {
        await base.clear()
    }

    func onMemoryWarning() {
        base.onMemoryWarning()
    }
}

extension CacheLevel {
    /// This level, recording its gets and sets in `trace` under `name`.
    ///
    /// - Parameters:
    ///   - name: How the trace names this level.
    ///   - trace: Where the gets and sets are recorded.
    /// - Returns: A level that behaves as this one.
    func traced(as name: String, into trace: LevelTrace) -> TracedLevel<Self> {
        TracedLevel(base: self, name: name, trace: trace)
    }
}
