import Foundation

@testable import Hoard

/// A string serializer that cannot read back one text: what a changed model does to old entries,
/// under the same value and serializer types.
struct PickySerializer: CacheSerializer {
    /// What decoding the refused text throws.
    struct Unreadable: Error {}

    /// The stored text it cannot decode; `nil` to read everything.
    let unreadable: String?

    init(refusingToRead unreadable: String? = nil) { self.unreadable = unreadable }

    func serialize(_ value: String) throws -> Data { Data(value.utf8) }

    func deserialize(_ data: Data) throws -> String {
        let text = String(decoding: data, as: UTF8.self)
        if text == unreadable { throw Unreadable() }
        return text
    }
}
