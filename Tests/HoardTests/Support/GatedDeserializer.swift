import Foundation
import HoardTestSupport

@testable import Hoard

/// A string serializer whose decoding, once armed, waits for a gate: holds a reader mid-read.
final class GatedDeserializer: CacheSerializer, Sendable {
    let gate = ThreadGate()
    let armed = Protected(false)
    let waiting = Counter()

    func serialize(_ value: String) throws -> Data { Data(value.utf8) }

    func deserialize(_ data: Data) throws -> String {
        if armed.withLock({ $0 }) {
            waiting.increment()
            gate.wait()
        }
        return String(decoding: data, as: UTF8.self)
    }
}
