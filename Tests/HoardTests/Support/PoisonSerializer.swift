import Foundation

@testable import Hoard

/// A UTF-8 string serializer that refuses to encode one value, for tests of values that cannot be
/// stored.
struct PoisonSerializer: CacheSerializer {
    /// What encoding the refused value throws.
    struct Rejected: Error {}

    /// The value it refuses to encode.
    let poison: String

    /// Creates a serializer that refuses to encode `poison`.
    init(refusing poison: String = "poison") { self.poison = poison }

    func serialize(_ value: String) throws -> Data {
        if value == poison { throw Rejected() }
        return Data(value.utf8)
    }

    func deserialize(_ data: Data) throws -> String { String(decoding: data, as: UTF8.self) }
}
