import Foundation

// What a shared level can do beyond `CacheLevel<String, Data>`: announce changes, store expiry
// dates, check its configuration when a cache is built. Package-wide: HoardRedis plugs in here.

/// What a shared level that tracks changes tells the caches in front of it.
///
/// A level that adopts ``InvalidatingCacheLevel`` delivers these, one at a time and in order, to
/// the handler given to ``InvalidatingCacheLevel/subscribeToInvalidations(_:)``.
package enum CacheInvalidation: Sendable, Equatable {
    /// These keys changed (were set, removed or expired) on the shared level: a copy in front of it
    /// may be stale. The keys are the level's keys, without any prefix the level adds.
    case keys([String])
    /// Any key may have changed and the level cannot say which (the tracking connection was lost,
    /// missed its deadline, or the server was flushed): every copy in front of the level may be
    /// stale, and every change until ``tracking`` comes may go unannounced (a cache then drops its
    /// copies at once, or keeps serving them and drops them when ``tracking`` comes, as its
    /// ``CacheCoherence/Outage`` says).
    case all(reason: String)
    /// Tracking is in place (again): every change from now on is announced, so copies may be taken.
    case tracking
}

/// A shared level whose clear can fail and say so.
///
/// `CacheLevel.clear()` cannot throw. A cache in front of a level that adopts this clears through
/// ``removeAll()`` instead, so that the saves a clear dropped (their values were to be replaced by
/// nothing) fail when the clear did, rather than return as if the level held what they asked for.
package protocol ClearReportingCacheLevel: Sendable {
    /// Removes every value the level holds, throwing when it could not.
    func removeAll() async throws
}

/// A subscription to a level's invalidations; ``cancel()`` ends it.
package protocol InvalidationSubscription: Sendable {
    /// Stops the deliveries; the handler is not called once this returns (except for a call under
    /// way on another thread). Calling it again does nothing.
    func cancel()
}

/// A cache level shared by several processes that announces which keys change, so that the caches in
/// front of it can drop their copies.
///
/// It is what ``CacheBuilder/coherence(_:)`` with ``CacheCoherence/invalidations`` needs. `RedisCacheLevel` (in `HoardRedis`) adopts it with
/// Redis's server-assisted client-side caching.
package protocol InvalidatingCacheLevel<Key, Value>: CacheLevel {
    /// Starts delivering invalidations to `handler`.
    ///
    /// The handler is called one event at a time, in order, on a thread of the level's; it must be
    /// quick and must not block. Until it has been told ``CacheInvalidation/tracking``, and after each
    /// ``CacheInvalidation/all(reason:)`` until the next ``CacheInvalidation/tracking``, the subscriber
    /// must assume that changes go unannounced.
    ///
    /// This may block the calling thread until the level knows whether it can track (at most about
    /// its connect timeout); a level that cannot reach its server yet returns, and announces
    /// ``CacheInvalidation/tracking`` once it can.
    ///
    /// - Parameter handler: Told each event.
    /// - Returns: The subscription; releasing it does not cancel it.
    /// - Throws: ``CacheError`` with code `invalidConfiguration` when the server refuses to track
    ///   (it has no push protocol, or refuses the tracking command), saying why.
    func subscribeToInvalidations(
        _ handler: @escaping @Sendable (CacheInvalidation) -> Void
    ) throws -> any InvalidationSubscription
}

/// A cache level that can store a value with an expiry date, so that a shared level forgets what
/// the caches in front of it would no longer serve.
///
/// ``CacheBuilder/sharedLevel(_:)`` takes any `CacheLevel<String, Data>`; when it also conforms to
/// this protocol, each value goes with its expiry (as `PX` milliseconds on Redis). Either way the
/// expiry also travels inside the stored bytes, so an expired value is a miss even on a level that
/// keeps it.
///
/// The date is one of the host's clock (`Date()`), which the level measures from: a cache whose
/// ``CacheBuilder/clock(_:)`` tells another time hands over the date that is as far from now as the
/// value's expiry is by its clock.
package protocol ExpiringCacheLevel<Key, Value>: CacheLevel {
    /// Stores a value that the level may forget from `expiresAt` (by the host's clock) on (`nil`:
    /// never).
    func set(_ value: Value, forKey key: Key, expiresAt: Date?) async throws
}

/// A shared level that reads many keys in one request (`MGET` on Redis).
///
/// A coherent cache reads back the keys whose announcements may be echoes of its own writes (see
/// `Cache.checkEcho`); the checks that wait meanwhile go in one such read. Without it, each key is
/// read on its own, all at once.
package protocol BatchReadingCacheLevel: Sendable {
    /// The value of each key, `nil` for a miss, in key order.
    ///
    /// - Throws: Any error: every key of the request then counts as failed.
    func values(forKeys keys: [String]) async throws -> [Data?]
}

/// A shared level that can tell, when a cache is built on it, whether its configuration can ever
/// work (a wrong password, a database the server lacks), so that `build()` throws instead of every
/// read going silently to the fetcher.
package protocol ConfigurationCheckingLevel: Sendable {
    /// Waits for the server's first answer (at most about the level's connect and command
    /// timeouts) and throws when it refused what cannot pass by itself; returns otherwise, a server
    /// that cannot be reached included (the level is fail-open).
    ///
    /// - Throws: ``CacheError`` with code `invalidConfiguration`, with the server's words.
    func checkConfiguration() throws(CacheError)
}

/// A shared level that can lease a key to one instance of a fleet while it fetches the key's value
/// from the origin, so that the others wait for the value instead of fetching it too (the leases of
/// memcache at Facebook, NSDI 2013).
///
/// It is what ``CacheBuilder/fleetSingleFetch(leaseDuration:waitLimit:)`` needs. A lease is named by
/// its key and a token the cache makes (unique to the fetch); it ends by itself after its duration.
/// Every write of a key ends its lease, so that a holder whose fetch outlived another instance's
/// write cannot overwrite the newer value. `RedisCacheLevel` (in `HoardRedis`) adopts it with
/// `SET … NX PX` and small Lua scripts.
///
/// Every method may fail (a server down, a timeout); the cache then fetches by itself (fail open).
package protocol LeasingCacheLevel<Key, Value>: CacheLevel {
    /// Takes the lease of `key` for `duration` with `token`, unless another token holds it.
    ///
    /// - Returns: `true` when the lease is now `token`'s, `false` when another holds it.
    func takeLease(forKey key: Key, token: String, duration: Duration) async throws -> Bool

    /// Stores `value` until `expiresAt` (`nil`: the level's default) only if `token` still holds the
    /// lease of `key`, and ends that lease, in one atomic step.
    ///
    /// - Returns: `false` when the lease was gone (it expired, or a write of the key ended it): then
    ///   nothing is stored.
    func set(_ value: Value, forKey key: Key, expiresAt: Date?, ifLeasedTo token: String) async throws -> Bool

    /// Ends the lease of `key` if `token` still holds it (the fetch failed, or was cancelled).
    func releaseLease(forKey key: Key, token: String) async throws

    /// Stores `value` until `expiresAt` (`nil`: the level's default) and ends any lease of `key`, in
    /// one atomic step: a write that is not a lease holder's.
    func setEndingLease(_ value: Value, forKey key: Key, expiresAt: Date?) async throws

    /// Removes the value of `key` and ends any lease of it, in one atomic step.
    func removeValueEndingLease(forKey key: Key) async throws
}
