import Foundation

extension SharedLevel {
    /// Makes a write with leases on: a fetched value only if its lease still holds, any other value
    /// ending the key's lease (so that a holder whose fetch outlived it cannot overwrite it).
    ///
    /// - Returns: The bytes stored, or `nil` when the lease was gone and nothing was stored.
    func leaseWrite(
        _ bytes: Data,
        forKey levelKey: String,
        expiresAt: Date?,
        lease: String?,
        _ leases: SharedLeases
    ) async throws -> Result<Data?, CacheError> {
        guard let lease else {
            try await leases.level.setEndingLease(bytes, forKey: levelKey, expiresAt: expiresAt)
            return .success(bytes)
        }
        do {
            guard try await leases.level.set(bytes, forKey: levelKey, expiresAt: expiresAt, ifLeasedTo: lease) else {
                HoardLogger.log(
                    .debug,
                    "Fleet single fetch: the lease of \"\(levelKey.prefix(100))\" was gone (it expired, or another "
                        + "instance wrote the key); the fetched value is not stored on the shared level."
                )
                return .success(nil)
            }
            return .success(bytes)
        } catch {
            leases.release(forKey: levelKey, token: lease)
            throw error
        }
    }
}
