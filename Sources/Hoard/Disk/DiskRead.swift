import Foundation

/// What a typed read of a disk store found for one key.
///
/// The one decoding of what ``DiskStore/lookup(_:countsAccess:)`` returns, shared by ``Cache`` and
/// ``DiskCacheLevel``: a pending write is taken as it is when it has the reader's type, and goes
/// through the serializers otherwise; an entry file is decoded; a value the serializer cannot read
/// is removed and logged. What to do with an expired value is the caller's choice.
@usableFromInline
enum DiskRead<Value: Sendable> {
    /// Nothing is stored (or a removal is pending, or the value could not be decoded).
    case miss
    /// A value, with its serialized size when it is known without serializing.
    case found(CachedValue<Value>, size: Int?)
    /// An expired value, not decoded; removing it is the caller's choice.
    case expired(ExpiredValue)

    /// Where an expired value is.
    @usableFromInline
    enum ExpiredValue {
        /// A pending write: remove it with a queued removal, if the key did not change.
        case pending
        /// An entry file holding `payload`: remove it with `DiskStore.removeExpired`.
        case stored(payload: Data, expiresAt: Expiry)
    }
}

extension DiskStore {
    /// Reads the value stored for `key` as a `Value`.
    ///
    /// - Parameters:
    ///   - key: The key.
    ///   - now: Now, in seconds since 1970: a value expired at that time is `.expired`, or, with
    ///     `keepingExpired`, decoded and returned. Asked only for a value that has a deadline, so
    ///     that a read of a value that never expires costs no clock read.
    ///   - keepingExpired: Whether an expired value is returned as found.
    ///   - countsAccess: Whether reading an entry file counts as an access for eviction.
    ///   - deserialize: The reader's serializer; it runs outside every lock.
    /// - Returns: What the store holds for the key.
    /// - Complexity: O(1), plus one file read and the serializer when the key has an entry file.
    @inlinable
    func read<Value: Sendable>(
        _ key: DiskKey,
        now: () -> Double,
        keepingExpired: Bool = false,
        countsAccess: Bool = true,
        deserialize: (Data) throws -> Value
    ) -> DiskRead<Value> {
        LockOrder.assertNoneHeld("calling the serializer")
        switch lookup(key, countsAccess: countsAccess) {
        case .miss:
            return .miss
        case .pending(let pending):
            if !keepingExpired, pending.expiresAt.isExpired(now: now) { return .expired(.pending) }
            if let same = pending.value as? Value {
                return .found(CachedValue(same, expiresAt: pending.expiresAt), size: nil)
            }
            // Set by another cache on the container, with another value type.
            guard let data = try? pending.serialize(), let decoded = try? deserialize(data) else { return .miss }
            return .found(CachedValue(decoded, expiresAt: pending.expiresAt), size: data.count)
        case .stored(let entry):
            if !keepingExpired, entry.expiresAt.isExpired(now: now) {
                return .expired(.stored(payload: entry.payload, expiresAt: entry.expiresAt))
            }
            do {
                let value = try deserialize(entry.payload)
                return .found(CachedValue(value, expiresAt: entry.expiresAt), size: entry.payload.count)
            } catch {
                discardUndecodable(key, payload: entry.payload, error: error)
                return .miss
            }
        }
    }

    /// Logs that the serializer could not decode `payload`, and removes the entry if it still holds it.
    @usableFromInline
    func discardUndecodable(_ key: DiskKey, payload: Data, error: any Error) {
        HoardLogger.log(
            .warning,
            CacheError.deserializationFailed(key: key.string, underlying: error).message + " Removing the entry."
        )
        removeIfUnchanged(key, payload: payload)
    }

    /// Removes the expired entry of `key` if it still holds `payload` and expires at `expiresAt`.
    ///
    /// - Returns: Whether the entry was removed.
    @usableFromInline
    func removeExpired(_ key: DiskKey, payload: Data, expiresAt: Expiry) -> Bool {
        guard removeIfUnchanged(key, payload: payload, expiresAt: expiresAt) else { return false }
        HoardLogger.log(.debug, "Removed the expired entry for \"\(key.string.prefix(100))\" from disk.")
        return true
    }
}
