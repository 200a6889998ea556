import Foundation

extension CacheEngine {
    /// What a read of the shared level found.
    enum SharedRead {
        /// A live value, with its serialized bytes.
        case hit(CachedValue<Value>, serialized: Data)
        /// Nothing, an expired value, or bytes that are not this cache's (another type, another
        /// version, damaged): all misses.
        case miss
        /// The shared level failed (a server down, a timeout): a miss for the caller, counted apart.
        case failed(CacheError)
    }

    /// The write that puts `cached` on the shared level: its serialized bytes (`serialized`, or the
    /// serializer's, run by the level's writer) inside the entry envelope, with its expiry; with a
    /// lease token, only if that lease still holds.
    func sharedWrite(
        of cached: CachedValue<Value>,
        forKey key: String,
        serialized: Data?,
        lease: String? = nil
    ) -> SharedLevel.Operation {
        let serializer = serializer
        let version = schemaVersion
        let value = cached.value
        let expiresAt = cached.expiresAt
        return .set(
            encode: {
                let payload = try serialized ?? serializer.serialize(value)
                return Data(
                    EntryFormat.encode(key: key, payload: payload, schemaVersion: version, expiresAt: expiresAt)
                )
            },
            expiresAt: expiresAt.date,
            lease: lease
        )
    }

    /// Reads `key` from the shared level, and checks and decodes what it finds.
    ///
    /// The bytes must be an intact entry envelope for this key and schema version, live now, that the
    /// serializer can read; anything else is a miss (a foreign, damaged or expired value is never
    /// served).
    func readShared(_ key: String) async -> SharedRead {
        guard let shared else { return .miss }
        let bytes: Data
        switch await shared.read(key) {
        case .failure(let error): return .failed(error)
        case .success(nil): return .miss
        case .success(let found?): bytes = found
        }
        guard let entry = try? EntryFormat.decode([UInt8](bytes)), entry.key == key,
            entry.schemaVersion == schemaVersion, !entry.expiresAt.isExpired(at: now)
        else { return .miss }
        LockOrder.assertNoneHeld("calling the serializer")
        guard let value = try? serializer.deserialize(entry.payload) else { return .miss }
        return .hit(CachedValue(value, expiresAt: entry.expiresAt), serialized: entry.payload)
    }
}
