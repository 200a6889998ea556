import Foundation

/// Turns values into bytes for the disk level, and back.
///
/// Hoard calls a serializer outside its locks, from the thread that reads a value or from its
/// background writer, so an implementation must be thread-safe. A serializer that throws never
/// harms the cache: a failed `serialize` leaves the value in memory only (or, when `maxRamCost` is
/// set and the size cannot be measured, out of the cache) and is reported to the delegate; a failed
/// `deserialize` is a miss, and the unreadable entry is removed.
public protocol CacheSerializer<Value>: Sendable {
    /// The type of the values this serializer handles.
    associatedtype Value

    /// Encodes a value.
    ///
    /// - Throws: Any error; Hoard reports it as ``CacheError/Code/serializationFailed``.
    func serialize(_ value: Value) throws -> Data

    /// Decodes what ``serialize(_:)`` produced.
    ///
    /// - Throws: Any error; Hoard treats the entry as damaged and removes it.
    func deserialize(_ data: Data) throws -> Value
}

/// Stores `Data` values as they are.
public struct DataSerializer: CacheSerializer {
    /// Creates the serializer.
    public init() {}

    /// Returns the data unchanged.
    public func serialize(_ value: Data) throws -> Data { value }

    /// Returns the data unchanged.
    public func deserialize(_ data: Data) throws -> Data { data }
}

/// Stores `String` values as UTF-8.
public struct StringSerializer: CacheSerializer {
    /// The bytes were not valid UTF-8.
    public struct InvalidUTF8: Error, Sendable {}

    /// Creates the serializer.
    public init() {}

    /// Encodes the string as UTF-8.
    public func serialize(_ value: String) throws -> Data { Data(value.utf8) }

    /// Decodes UTF-8 bytes.
    ///
    /// - Throws: ``InvalidUTF8`` when the bytes are not valid UTF-8.
    public func deserialize(_ data: Data) throws -> String {
        guard let string = String(data: data, encoding: .utf8) else { throw InvalidUTF8() }
        return string
    }
}
