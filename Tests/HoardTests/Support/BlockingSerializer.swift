import Foundation
import HoardTestSupport

@testable import Hoard

/// A string serializer that waits for a gate before its first encoding, to hold the writer.
final class BlockingSerializer: CacheSerializer, Sendable {
    let gate = ThreadGate()
    let started = Counter()

    func serialize(_ value: String) throws -> Data {
        if started.increment() == 1 { gate.wait() }
        return Data(value.utf8)
    }

    func deserialize(_ data: Data) throws -> String { String(decoding: data, as: UTF8.self) }
}
