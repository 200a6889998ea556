import Foundation

/// Stores `Codable` values as JSON; the default serializer of ``CacheBuilder`` for `Codable` values.
///
/// Pass your own encoder and decoder to change date, key or data strategies:
/// ```swift
/// let encoder = JSONEncoder()
/// encoder.dateEncodingStrategy = .iso8601
/// let decoder = JSONDecoder()
/// decoder.dateDecodingStrategy = .iso8601
/// let builder = CacheBuilder<Event>(serializer: CodableSerializer(encoder: encoder, decoder: decoder))
/// ```
/// Configure the encoder and decoder before passing them and do not change them afterwards: Hoard
/// uses them from several threads.
public struct CodableSerializer<Value: Codable>: CacheSerializer, @unchecked Sendable {
    // Safe because the encoder and decoder are only read after `init` (their documented contract
    // is that they are not mutated once handed over), and `encode`/`decode` do not mutate them.
    private let encoder: JSONEncoder
    private let decoder: JSONDecoder

    /// Creates a JSON serializer.
    ///
    /// - Parameters:
    ///   - encoder: The encoder for ``serialize(_:)``; not to be changed afterwards.
    ///   - decoder: The decoder for ``deserialize(_:)``; not to be changed afterwards.
    public init(encoder: JSONEncoder = JSONEncoder(), decoder: JSONDecoder = JSONDecoder()) {
        self.encoder = encoder
        self.decoder = decoder
    }

    /// Encodes the value as JSON.
    public func serialize(_ value: Value) throws -> Data { try encoder.encode(value) }

    /// Decodes a value from JSON.
    public func deserialize(_ data: Data) throws -> Value { try decoder.decode(Value.self, from: data) }
}
