import Foundation
import Hoard

extension RedisCacheLevel.Configuration {
    /// Where a Redis Cluster's nodes are first looked for, and how the level follows the cluster.
    ///
    /// The level asks a node for the cluster's map of hash slots (`CLUSTER SHARDS`, or `CLUSTER
    /// SLOTS` before Redis 7), keeps a pool of connections per primary, and sends each command to
    /// the primary that owns its key's slot (CRC16 of the key, or of its `{hash tag}`). A `MOVED`
    /// reply updates the map and sends the command where it points; an `ASK` reply (a slot being
    /// migrated) sends it once to the node it names, after `ASKING`. The map is asked again after a
    /// redirection, after a node fails, every ``topologyRefreshInterval``, and every second while
    /// the map leaves slots without a primary.
    ///
    /// A primary that is down makes a `CacheError` with code `network` for the keys of its slots
    /// only (the cache treats it as a miss), within the command timeout; its circuit breaker skips
    /// it as for a single server, while the others serve.
    public struct Cluster: Sendable, Equatable {
        /// The nodes asked for the map, in order, until one answers.
        ///
        /// Any node of the cluster will do; more than one keeps the level starting while one is
        /// down. Once the level knows the
        /// cluster, it asks the primaries it knows first.
        public var seeds: [Endpoint]
        /// How often the level asks for the map when nothing made it ask sooner (30 s by default).
        public var topologyRefreshInterval: Duration
        /// How many redirections (`MOVED`, `ASK`) and retries (`TRYAGAIN`) one command goes
        /// through before it fails (5 by default), within its command timeout.
        ///
        /// `CLUSTERDOWN` (a cluster that requires every slot served, while one has no primary) is
        /// not counted: it is retried until the command's deadline, as a failover's election ends
        /// it, unless the cluster has answered so for 10 seconds, or a shard has had no primary for
        /// that long; then it fails at once.
        public var maximumRedirections: Int
        /// Whether reads (`GET`, `MGET`, `PTTL`) go to the replicas of their slot's primary, in
        /// turn, after `READONLY` (`false` by default: every command goes to the primary).
        ///
        /// A replica lags its primary: a read may return a value older than one the level stored a
        /// moment before. Reads go to the primaries anyway once the level is subscribed to for
        /// `CacheCoherence.invalidations`, whose announcements come from the primaries: a copy read
        /// from a replica after the announcement of a change it has not applied yet would stay
        /// stale; they stay on the primaries for the rest of the level's life once a cache has
        /// subscribed.
        public var readsFromReplicas: Bool

        /// Cluster settings from their parts.
        public init(
            seeds: [Endpoint],
            topologyRefreshInterval: Duration = .seconds(30),
            maximumRedirections: Int = 5,
            readsFromReplicas: Bool = false
        ) {
            self.seeds = seeds
            self.topologyRefreshInterval = topologyRefreshInterval
            self.maximumRedirections = maximumRedirections
            self.readsFromReplicas = readsFromReplicas
        }
    }

    /// A configuration for the Redis Cluster that `seeds` belong to.
    ///
    /// Each URL is a node's, `redis://[user:password@]host:port` or `rediss://…` for TLS; any node
    /// of the cluster will do. The URLs' login and the first URL's scheme are used for every node (change
    /// ``username``, ``password``, ``tls`` and the rest afterwards when needed). A cluster has only
    /// database 0. ``poolSize`` counts each node's connections, 2 by default here.
    ///
    /// - Throws: `CacheError` with code `invalidConfiguration` when there is no URL, a URL is not of
    ///   that form or names a database other than 0, or the URLs disagree on TLS or on the login
    ///   (a URL without one agrees with any).
    public init(cluster seeds: [String]) throws {
        guard !seeds.isEmpty else {
            throw CacheError.invalidConfiguration("Redis: a cluster configuration needs at least one node URL.")
        }
        let parsed = try seeds.map { try Self(url: $0) }
        guard parsed.allSatisfy({ ($0.tls == nil) == (parsed[0].tls == nil) }) else {
            throw CacheError.invalidConfiguration("Redis: the cluster URLs mix redis:// and rediss://.")
        }
        for (url, configuration) in zip(seeds, parsed) {
            guard configuration.socketPath == nil else {
                throw CacheError.invalidConfiguration(
                    "Redis: cluster nodes are reached over TCP; \(url) names a socket."
                )
            }
            guard configuration.database == 0 else {
                throw CacheError.invalidConfiguration(
                    "Redis: a cluster has only database 0; \(url) names database \(configuration.database)."
                )
            }
        }
        let logins = parsed.filter { $0.username != nil || $0.password != nil }
        guard logins.allSatisfy({ $0.username == logins[0].username && $0.password == logins[0].password }) else {
            throw CacheError.invalidConfiguration(
                "Redis: the cluster URLs name different logins; one serves every node."
            )
        }
        self = parsed[0]
        // Per node. Each connection has an I/O thread, and every caller's commands are pipelined
        // on it: on a 2-core host three primaries were 1.3 to 1.9 times as fast with 2 connections
        // each as with 4.
        poolSize = 2
        username = logins.first?.username
        password = logins.first?.password
        cluster = Cluster(seeds: parsed.map { Endpoint(host: $0.host, port: $0.port) })
    }
}

extension RedisCacheLevel {
    /// A level on a Redis Cluster: each key goes to the primary that owns its slot.
    ///
    /// ```swift
    /// let shared = try RedisCacheLevel(
    ///     cluster: ["redis://10.0.0.5:6379", "redis://10.0.0.6:6379", "redis://10.0.0.7:6379"],
    ///     namespace: "users"
    /// )
    /// ```
    /// See ``Configuration/Cluster`` for how the level finds and follows the cluster, and
    /// ``Configuration/init(cluster:)`` for what the URLs set.
    ///
    /// - Throws: `CacheError` with code `invalidConfiguration` for a URL or setting out of range.
    public convenience init(cluster seeds: [String], namespace: String) throws {
        try self.init(Configuration(cluster: seeds), namespace: namespace)
    }
}
