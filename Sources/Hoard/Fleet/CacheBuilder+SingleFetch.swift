import Foundation

extension CacheBuilder {
    /// The options of ``fleetSingleFetch(leaseDuration:waitLimit:)``.
    struct SingleFetch: Sendable {
        var leaseDuration: Duration
        var waitLimit: Duration
        /// The pauses of a waiter between its reads (the tests lengthen them, to tell a wake-up by an
        /// invalidation from a read after a pause).
        var pauses = (first: SharedLeases.firstPause, longest: SharedLeases.longestPause)
    }

    /// Makes the instances of a fleet that miss one key at once call the fetcher once between them,
    /// instead of once each: the first takes a lease on the key in the shared level, the others wait
    /// for its value (default: off; each process fetches on its own).
    ///
    /// ```swift
    /// let users = try CacheBuilder<User>()
    ///     .containerName("users")
    ///     .sharedLevel(try RedisCacheLevel(url: "redis://127.0.0.1:6379/0", namespace: "users"))
    ///     .coherence(.invalidations)          // optional: wakes the waiters as soon as the value lands
    ///     .fleetSingleFetch(leaseDuration: .seconds(10), waitLimit: .seconds(2))
    ///     .fetcher { id in try await api.user(id: id) }
    ///     .build()
    /// ```
    /// The leases of memcache at Facebook ("Scaling Memcache at Facebook", NSDI 2013), on the shared
    /// level:
    /// - A miss in memory, on disk and in the shared level takes the key's lease (on Redis,
    ///   `SET … NX PX`) before it calls the fetcher. Concurrent misses in one process already share
    ///   one fetch; this extends that to every process of the fleet.
    /// - An instance that finds the lease taken waits for the holder's value: it reads the shared
    ///   level again after a pause that grows from 2 ms to at most 50 ms, or as soon as an invalidation
    ///   of the key comes (with ``coherence(_:)`` `.invalidations`), and takes the lease over if it
    ///   was released (the holder's fetch failed) or expired (the holder died). After `waitLimit` it
    ///   calls the fetcher by itself. Nothing blocks a thread while it waits; cancelling the caller
    ///   ends the wait.
    /// - The holder stores its value on the shared level only if its lease still holds, in one
    ///   atomic step that also ends the lease. Every other write of the key (a `set` or a removal by
    ///   any instance with this option) ends the lease: a fetch that started before that write can
    ///   no longer overwrite it with an older value. A failed or cancelled fetch releases the lease.
    /// - A shared level that fails (a server down, a timeout) is a miss, as always: the instance
    ///   fetches by itself at once. Leases save the origin work; they never make a read wait on a
    ///   server that cannot answer.
    ///
    /// Give every instance that writes the keys this option: a write by an instance without it does
    /// not end the key's lease. Requires a ``sharedLevel(_:)`` that can lease (`RedisCacheLevel` can,
    /// with the server's scripting, `EVAL`, allowed).
    ///
    /// - Parameters:
    ///   - leaseDuration: How long a lease lasts unless its holder stores or releases it first (more
    ///     than zero). Choose it above your slowest fetch: a fetch that outlasts its lease is not
    ///     stored on the shared level, and another instance may fetch the key too.
    ///   - waitLimit: The longest an instance waits for another's fetch before it fetches by itself
    ///     (more than zero): the most a holder that died can delay the others. The reads and lease
    ///     requests made while waiting count toward it, even on a level that stops answering (a
    ///     cluster in an election): one that has not answered by the limit is no longer waited for
    ///     (each gets 50 ms at least, so the wait may end up to about 150 ms late), and a lease
    ///     granted to it too late is given back. The first lease request, made before the wait
    ///     begins, is bounded by the level's own command timeout.
    /// - Returns: The builder.
    public func fleetSingleFetch(leaseDuration: Duration = .seconds(10), waitLimit: Duration = .seconds(2)) -> Self {
        var copy = self
        copy.singleFetch = SingleFetch(leaseDuration: leaseDuration, waitLimit: waitLimit)
        return copy
    }

    /// Checks the single-fetch options against the rest of the configuration.
    ///
    /// - Throws: ``CacheError`` with code `invalidConfiguration`.
    func checkSingleFetch() throws(CacheError) {
        guard let singleFetch else { return }
        guard let sharedLevel else {
            throw .invalidConfiguration(
                "fleetSingleFetch(leaseDuration:waitLimit:) takes leases on a shared level: call .sharedLevel(…) too, "
                    + "or remove .fleetSingleFetch(…)."
            )
        }
        guard sharedLevel is any LeasingCacheLevel<String, Data> else {
            throw .invalidConfiguration(
                "fleetSingleFetch(leaseDuration:waitLimit:) needs a shared level that can lease keys (a LeasingCacheLevel, "
                    + "such as RedisCacheLevel); \(type(of: sharedLevel)) cannot. Remove .fleetSingleFetch(…): each "
                    + "process then fetches on its own."
            )
        }
        guard singleFetch.leaseDuration > .zero else {
            throw .invalidConfiguration(
                "fleetSingleFetch's leaseDuration must be more than zero, not \(singleFetch.leaseDuration)."
            )
        }
        guard singleFetch.waitLimit > .zero else {
            throw .invalidConfiguration(
                "fleetSingleFetch's waitLimit must be more than zero, not \(singleFetch.waitLimit)."
            )
        }
    }

    /// The leases of a cache built with ``fleetSingleFetch(leaseDuration:waitLimit:)``, once checked.
    func makeLeases() -> SharedLeases? {
        guard let singleFetch, let level = sharedLevel as? any LeasingCacheLevel<String, Data> else { return nil }
        return SharedLeases(
            level,
            leaseDuration: singleFetch.leaseDuration,
            waitLimit: singleFetch.waitLimit,
            pauses: singleFetch.pauses
        )
    }
}
