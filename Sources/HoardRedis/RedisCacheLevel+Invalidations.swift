import Foundation
import Hoard

extension RedisCacheLevel: InvalidatingCacheLevel {
    /// Subscribes to the invalidations of this level's namespace: Redis's server-assisted
    /// client-side caching (RESP3, `CLIENT TRACKING ON BCAST PREFIX <namespace>:`), for
    /// `CacheCoherence.invalidations`.
    ///
    /// Each process opens one tracking connection per server, database, user, client name and
    /// namespace, whatever the number of levels and caches on it; the data connections stay
    /// untracked. The server then
    /// pushes an `invalidate` message for each change of a key of the namespace (a set, a removal, an
    /// expiry or an eviction), this process's own writes included. A `FLUSHALL` or `FLUSHDB` is
    /// `CacheInvalidation.all(reason:)` followed by `CacheInvalidation.tracking`. The connection
    /// pings the server after ``Configuration/trackingPingInterval`` of quiet; when it closes, fails or
    /// misses ``Configuration/trackingPingTimeout``, subscribers hear
    /// `CacheInvalidation.all(reason:)`, and `CacheInvalidation.tracking` once a new connection
    /// tracks again.
    ///
    /// Blocks the caller until the server's first answer, at most the connect timeout plus the command
    /// timeout.
    ///
    /// - Parameter handler: Told each event, on the tracking connection's I/O thread.
    /// - Returns: The subscription; the last one cancelled closes the tracking connection.
    /// - Throws: `CacheError` with code `invalidConfiguration` when the server refuses `HELLO 3` or
    ///   `CLIENT TRACKING` (Redis 5 and older, some proxies and managed services).
    public func subscribeToInvalidations(
        _ handler: @escaping @Sendable (CacheInvalidation) -> Void
    ) throws -> any InvalidationSubscription {
        try TrackingHub.subscribe(configuration, namespace: namespace, handler: handler)
    }
}
