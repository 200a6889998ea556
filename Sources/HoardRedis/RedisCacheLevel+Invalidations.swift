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
    /// pings the server ``Configuration/trackingPingInterval`` after each answer to its last ping; when it closes, fails or
    /// misses ``Configuration/trackingPingTimeout``, subscribers hear
    /// `CacheInvalidation.all(reason:)`, and `CacheInvalidation.tracking` once a new connection
    /// tracks again.
    ///
    /// Blocks the caller until the first attempt's outcome: the server accepted tracking, refused it
    /// for good, or the attempt failed (the connect refused, or an error that may pass, such as too
    /// many clients or a wrong password: the connection retries with a growing backoff and the cache
    /// stays closed to local reads until it tracks). That is at most the connect timeout plus the
    /// command timeout. Only an unknown `HELLO` or `NOPROTO`, and an unknown `CLIENT TRACKING` or
    /// `NOPERM`, count as refusals, and only as the first answer this call waits for: later (after
    /// the first attempt failed for a passing reason, or answered too late, or once the server has
    /// tracked) they are logged and retried, as are those that reach other subscribers of the same
    /// connection whose calls returned.
    ///
    /// On a cluster, there is such a connection to every primary (see `ClusterTracking`), and
    /// `tracking` means that every primary tracks.
    ///
    /// - Parameter handler: Told each event, on the tracking connection's I/O thread.
    /// - Returns: The subscription; the last one cancelled closes the tracking connection.
    /// - Throws: `CacheError` with code `invalidConfiguration` when the server does not know `HELLO 3`
    ///   or `CLIENT TRACKING`, or does not allow it (Redis 5 and older, some proxies and managed
    ///   services).
    package func subscribeToInvalidations(
        _ handler: @escaping @Sendable (CacheInvalidation) -> Void
    ) throws -> any InvalidationSubscription {
        switch nodes {
        case .server: try TrackingHub.subscribe(configuration, namespace: namespace, handler: handler)
        case .cluster(let router): try ClusterTracking.subscribe(router, namespace: namespace, handler: handler)
        }
    }
}

extension RedisCacheLevel: ConfigurationCheckingLevel {
    /// Sends a `PING` and waits for its outcome (at most twice the connect timeout plus the command
    /// timeout, a server that is down or refuses fails it sooner): a login or database refusal that cannot pass by itself (see
    /// ``RedisFailure/isPermanentMisconfiguration``) throws; anything else returns, a server that
    /// cannot be reached or is slow included.
    ///
    /// - Throws: `CacheError` with code `invalidConfiguration`, with the server's words.
    package func checkConfiguration() throws(CacheError) {
        let outcome = Locked<Result<RESPValue, any Error>?>(nil)
        let answered = DispatchSemaphore(value: 0)
        // Long enough for two logins and the reply: a loss after a certificate request is a refusal
        // only the second time in a row (see `ConnectionLoop.handshake`).
        let wait = configuration.connectTimeout * 2 + configuration.commandTimeout
        send(RESPCommand("PING", [], isIdempotent: true), deadline: .now + wait) { result in
            outcome.withLock { $0 = result }
            answered.signal()
        }
        // The PING's own deadline ends it; the margin lets its failure arrive.
        let margin = wait + configuration.connectTimeout
        let seconds = Double(margin.components.seconds) + Double(margin.components.attoseconds) * 1e-18
        _ = answered.wait(timeout: .now() + seconds)
        guard case .failure(let error)? = outcome.withLock({ $0 }),
            let failure = (error as? CacheError)?.underlyingError as? RedisFailure,
            failure.isPermanentMisconfiguration
        else { return }
        let check =
            failure.description.contains("TLS")
            ? "TLS settings (the authorities trusted, the server name, the client certificate) and the "
                + "server's certificate"
            : "user, the password and the database number of the level's configuration"
        // The server's words may end a sentence already.
        var reason = failure.description
        while reason.hasSuffix(".") { reason.removeLast() }
        throw .invalidConfiguration(
            "Redis at \(configuration.server): \(reason). This cannot pass by itself: check the \(check)."
        )
    }
}

/// A coherent cache's read-backs of its own writes go in one `MGET` (one per slot on a cluster).
extension RedisCacheLevel: BatchReadingCacheLevel {}

extension RedisCacheLevel: ClearReportingCacheLevel {}
