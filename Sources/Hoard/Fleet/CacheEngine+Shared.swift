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

    /// Sends a fetched value to the shared level under its lease after the local levels refused it
    /// (the key, or a key counted with it, changed while it was fetched), so that the fleet's one
    /// fetch still reaches the others; the server refuses it if a write of the key ended the lease.
    ///
    /// Not when this cache's own write of the key is queued or under way: that write is the key's
    /// latest change, and ends the lease there.
    ///
    /// - Returns: Whether the write was queued (the lease is then spent by it).
    func shareUnderLease(_ cached: CachedValue<Value>, forKey key: String, lease: String) -> Bool {
        guard let shared else { return false }
        // Under the key's stripe, as a set's queuing is: a set made after this check is queued after
        // this write, and replaces it or follows it.
        let (_, isQueued) = stripes.changes(key.hashValue) { () -> Bool in
            guard !shared.hasOwnWriteUnderWay(of: key) else { return false }
            shared.enqueue(sharedWrite(of: cached, forKey: key, serialized: nil, lease: lease), forKey: key)
            return true
        }
        return isQueued
    }

    /// Reads `key` from the shared level, and checks and decodes what it finds.
    ///
    /// The bytes must be an intact entry envelope for this key and schema version, live now, that the
    /// serializer can read; anything else is a miss (a foreign, damaged or expired value is never
    /// served).
    func readShared(_ key: String) async -> SharedRead {
        guard let shared else { return .miss }
        // Another process removed the key (or cleared) on the container, and its change of the
        // shared level may not have been made yet: what the level holds may be the value removed,
        // which would outlive the removal on the container once filled there. A miss: the fetcher's
        // value, read after the removal, is the key's latest.
        if let disk, disk.isSharedChangePending(of: key) { return .miss }
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
