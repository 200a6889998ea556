import HoardTestSupport

@testable import Hoard

/// An integer key whose hash value is the same in every process.
///
/// `Int.hashValue` (like `String.hashValue`) is seeded anew in every process, and the eviction
/// indexes take their table positions, W-TinyLFU's sketch counters and the experts' sample from a
/// key's `hashValue`. A test of W-TinyLFU's decisions with `Int` keys therefore runs a different
/// trace of sketch collisions in every process, and an assertion that holds for most seeds fails for
/// a few. This key mixes its value with SplitMix64 instead: as well spread, and the same every run.
struct StableKey: Hashable, Comparable, Sendable, ExpressibleByIntegerLiteral, CustomStringConvertible {
    let raw: Int

    init(_ raw: Int) { self.raw = raw }
    init(integerLiteral raw: Int) { self.raw = raw }

    /// The hash value the indexes use: fixed for a given key, whatever the process's seed.
    var hashValue: Int {
        var generator = SplitMix64(seed: UInt64(bitPattern: Int64(raw)))
        return Int(truncatingIfNeeded: generator.next())
    }

    func hash(into hasher: inout Hasher) { hasher.combine(hashValue) }

    static func < (lhs: StableKey, rhs: StableKey) -> Bool { lhs.raw < rhs.raw }

    var description: String { "\(raw)" }
}

/// The calls the tests make with `Int` keys, on an index of stable keys.
extension EvictionIndex where Key == StableKey {
    func contains(_ key: Int) -> Bool { contains(StableKey(key)) }

    mutating func access(_ key: Int) -> Payload? { access(StableKey(key)) }

    @discardableResult
    mutating func upsert(_ payload: Payload, forKey key: Int) -> Payload? { upsert(payload, forKey: StableKey(key)) }

    @discardableResult
    mutating func removeValue(forKey key: Int) -> Payload? { removeValue(forKey: StableKey(key)) }
}

/// The calls the tests make with `Int` keys, on a store of stable keys.
extension MemoryStore where Key == StableKey {
    func contains(_ key: Int) -> Bool { contains(StableKey(key)) }

    func value(forKey key: Int) -> Value? { value(forKey: StableKey(key)) }

    @discardableResult
    func set(_ value: Value, forKey key: Int) -> (key: StableKey, value: Value)? { set(value, forKey: StableKey(key)) }
}
