import Foundation
import Hoard

extension RedisCacheLevel.Configuration {
    /// A server's address: a host name or numeric address, and a TCP port.
    public struct Endpoint: Sendable, Hashable, CustomStringConvertible {
        /// The host name or numeric address (IPv6 without brackets).
        public var host: String
        /// The TCP port.
        public var port: Int

        /// An endpoint from its parts.
        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        /// `host:port`, with brackets around an IPv6 address.
        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    /// Where the Sentinels that watch a primary are, and its name among them.
    ///
    /// At every connection and reconnection the level asks the Sentinels, in order, for the
    /// primary's address (`SENTINEL GET-MASTER-ADDR-BY-NAME`), connects there, and checks with
    /// `ROLE` that the server is a primary: a replica (a failover under way, an answer that was
    /// already old) fails the attempt, which is retried with the reconnection backoff. Sentinels
    /// close the clients of a server they demote, so after a failover every connection, the
    /// tracking one included, comes back on the new primary.
    ///
    /// The level also subscribes to `+promoted-slave` and `+switch-master` on every Sentinel, and
    /// when they announce a new primary every connection to the old one connects again at once,
    /// even from a primary cut off from the Sentinels that never closed its clients. Each time a
    /// subscription is made (again, after a lost connection), the level asks that Sentinel for the
    /// primary, and an answer other than the primary its connections use counts as an
    /// announcement: a move announced while the subscription was down is not missed. Levels of a
    /// process with the same Sentinels, primary name, Sentinel login and TLS settings share one
    /// subscription to each Sentinel, opened with the first level's timeouts and client name
    /// (`<clientName>-sentinel`) and closed with the last level.
    public struct Sentinel: Sendable, Equatable {
        /// The Sentinels, asked in order until one knows the primary.
        public var sentinels: [Endpoint]
        /// The name the Sentinels monitor the primary under (`sentinel monitor <name> …`).
        public var primaryName: String
        /// The ACL user to log in to the Sentinels as, if they ask for a login.
        public var username: String?
        /// The Sentinels' password (`requirepass` in their configuration), or `nil` for none.
        public var password: String?

        /// Sentinel settings from their parts.
        public init(sentinels: [Endpoint], primaryName: String, username: String? = nil, password: String? = nil) {
            self.sentinels = sentinels
            self.primaryName = primaryName
            self.username = username
            self.password = password
        }
    }

    /// A configuration for the primary that Sentinels watch under `primaryName`.
    ///
    /// Each URL is a Sentinel's, `redis://[user:password@]host:port` or `rediss://…` for TLS. The
    /// first URL's login is used for the Sentinels and for the primary, its scheme for both, and
    /// its database number for the primary; change ``username``, ``password``, ``sentinel`` and
    /// the rest afterwards when they differ.
    ///
    /// - Throws: `CacheError` with code `invalidConfiguration` when there is no URL, a URL is not
    ///   of that form, or the URLs disagree on TLS.
    public init(sentinels urls: [String], primaryName: String) throws {
        guard let first = urls.first else {
            throw CacheError.invalidConfiguration("Redis: a Sentinel configuration needs at least one Sentinel URL.")
        }
        let parsed = try urls.map { try Self(url: $0) }
        guard parsed.allSatisfy({ ($0.tls == nil) == (parsed[0].tls == nil) }) else {
            throw CacheError.invalidConfiguration("Redis: the Sentinel URLs mix redis:// and rediss://.")
        }
        guard parsed.allSatisfy({ $0.socketPath == nil }) else {
            throw CacheError.invalidConfiguration("Redis: Sentinels are reached over TCP; \(first) names a socket.")
        }
        self = parsed[0]
        sentinel = Sentinel(
            sentinels: parsed.map { Endpoint(host: $0.host, port: $0.port) },
            primaryName: primaryName,
            username: parsed[0].username,
            password: parsed[0].password
        )
    }
}

extension RedisCacheLevel {
    /// A level on the primary that Sentinels watch under `primaryName`, followed through failovers.
    ///
    /// ```swift
    /// let shared = try RedisCacheLevel(
    ///     sentinels: ["redis://10.0.0.5:26379", "redis://10.0.0.6:26379", "redis://10.0.0.7:26379"],
    ///     primaryName: "cache",
    ///     namespace: "users"
    /// )
    /// ```
    /// See ``Configuration/Sentinel`` for how the primary is found and followed, and
    /// ``Configuration/init(sentinels:primaryName:)`` for what the URLs set.
    ///
    /// - Throws: `CacheError` with code `invalidConfiguration` for a URL or setting out of range.
    public convenience init(sentinels: [String], primaryName: String, namespace: String) throws {
        try self.init(Configuration(sentinels: sentinels, primaryName: primaryName), namespace: namespace)
    }
}
