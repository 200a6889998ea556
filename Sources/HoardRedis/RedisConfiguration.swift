import Foundation
import Hoard

extension RedisCacheLevel {
    /// Where the server is, how to log in, and how long to wait for it.
    ///
    /// ```swift
    /// var configuration = try RedisCacheLevel.Configuration(url: "redis://cache.internal:6379/2")
    /// configuration.commandTimeout = .milliseconds(250)
    /// let shared = RedisCacheLevel(configuration, namespace: "users")
    /// ```
    public struct Configuration: Sendable, Equatable {
        /// The server's host name or numeric address (IPv4, or IPv6 without brackets); unused with a
        /// ``socketPath``.
        public var host: String
        /// The server's TCP port; 6379 by default; unused with a ``socketPath``.
        public var port: Int
        /// The path of the server's Unix-domain socket (`unixsocket` in `redis.conf`), or `nil` for
        /// TCP to ``host`` and ``port``.
        ///
        /// On one host, a socket saves the TCP stack's work on every command. Everything else (the
        /// login, the database, the timeouts, tracking for coherence) is as over TCP.
        public var socketPath: String?
        /// The Sentinels that say which server is the primary, or `nil` (the default) for the fixed
        /// ``host`` and ``port``; with them, ``host`` and ``port`` are unused.
        public var sentinel: Sentinel?
        /// The Redis Cluster the level spreads its keys over, or `nil` (the default) for one server;
        /// with it, ``host`` and ``port`` are unused.
        public var cluster: Cluster?
        /// TLS for the connection (`rediss://`), or `nil` (the default) for plain TCP.
        ///
        /// On Linux it needs the package trait `TLS`, which links the system's OpenSSL; Apple
        /// platforms use their own TLS with or without it. A build without TLS refuses a
        /// configuration that asks for it, at once.
        public var tls: TLS?
        /// The ACL user to log in as; `nil` logs in as `default` when there is a password.
        public var username: String?
        /// The password, or `nil` when the server asks for none.
        public var password: String?
        /// Where the user and password come from when they rotate: asked at every connection and
        /// reconnection, instead of ``username`` and ``password``; `nil` (the default) uses those.
        ///
        /// ```swift
        /// configuration.credentials = .init { try secrets.currentRedisLogin() }
        /// ```
        /// It is called before each login, on a thread of its own: keep it quick (read what a
        /// rotation job stored), never waiting on the network. An error it throws fails that
        /// connection attempt like a refused login; the level retries with a growing backoff. A
        /// call slower than ``connectTimeout`` fails the attempt too (commands waiting for the
        /// connection time out at their own deadline meanwhile), and the next attempt waits for that
        /// same call instead of calling again: a connection calls the provider once at a time.
        public var credentials: CredentialsProvider?
        /// The database number (`SELECT`); 0 by default.
        public var database: Int
        /// How many connections the level keeps open, shared by every caller
        /// (``defaultPoolSize`` by default); on a cluster, how many it keeps to each node (2 by
        /// default there).
        ///
        /// Each connection pipelines every request its callers send, so one carries many callers;
        /// more connections help only when the host has cores to spare for their I/O threads.
        public var poolSize: Int
        /// The pool size of a single server or a Sentinel-found primary unless set: one connection
        /// for every two cores of this host, from 1 to 4.
        ///
        /// Every connection has an I/O thread of its own. On a host with few cores, those threads and
        /// the callers compete for the same cores, and fewer connections are faster: on 2 cores, one
        /// connection served 0.98 to 2.34 times the requests of four in the same run (see the Fleets
        /// article).
        public static var defaultPoolSize: Int {
            min(4, max(1, ProcessInfo.processInfo.activeProcessorCount / 2))
        }
        /// How long connecting and the handshake may take; 1 s by default.
        public var connectTimeout: Duration
        /// How long a caller waits for a reply; 1 s by default.
        public var commandTimeout: Duration
        /// The expiry of a value stored without one; `nil` (the default) keeps it until evicted.
        public var defaultTTL: Duration?
        /// The largest reply accepted, in bytes (512 MB by default); a larger one closes its connection.
        public var maximumReplySize: Int
        /// The name the connections give themselves (`CLIENT SETNAME`), or `nil` for none.
        ///
        /// The tracking connection of `CacheCoherence.invalidations` is named `<clientName>-tracking`
        /// (`hoard-tracking` without one).
        public var clientName: String?
        /// With `CacheCoherence.invalidations`: how long after the answer to its last ping the
        /// tracking connection pings the server again, pushes or not (1 s by default).
        public var trackingPingInterval: Duration
        /// With `CacheCoherence.invalidations`: how long the server has to answer the tracking
        /// connection's ping before the connection counts as lost and the caches drop their local
        /// copies (2 s by default).
        public var trackingPingTimeout: Duration
        /// How many commands in a row may fail for the server's silence (no reply within their
        /// timeout) before the level stops sending commands to a stalled server (3 by default; 0
        /// never stops).
        ///
        /// A command sent with less than half of ``commandTimeout`` left (a Redis Cluster command
        /// that waited for a map through an election) does not count.
        ///
        /// Then every call fails at once (a `CacheError` with code `network`, which the cache treats as a
        /// miss) instead of waiting the command timeout, while a `PING` probes the server, after 1 s,
        /// then after twice the last pause up to 30 s; the first answer ends it.
        public var timeoutsBeforeSkipping: Int
        /// Whether the connections send `READONLY` after logging in: a cluster replica's pool, for
        /// ``Cluster/readsFromReplicas``.
        var readsAsReplica = false

        /// A configuration from its fields.
        ///
        /// - Parameters:
        ///   - host: The host name or numeric address.
        ///   - port: The TCP port.
        ///   - username: The ACL user, if any.
        ///   - password: The password, if any.
        ///   - database: The database number.
        public init(
            host: String,
            port: Int = 6379,
            username: String? = nil,
            password: String? = nil,
            database: Int = 0
        ) {
            self.host = host
            self.port = port
            socketPath = nil
            sentinel = nil
            cluster = nil
            tls = nil
            credentials = nil
            self.username = username
            self.password = password
            self.database = database
            poolSize = Self.defaultPoolSize
            connectTimeout = .seconds(1)
            commandTimeout = .seconds(1)
            defaultTTL = nil
            maximumReplySize = 512 << 20
            clientName = nil
            trackingPingInterval = .seconds(1)
            trackingPingTimeout = .seconds(2)
            timeoutsBeforeSkipping = 3
        }

        /// A configuration for a server's Unix-domain socket.
        ///
        /// - Parameters:
        ///   - socketPath: The socket's path, such as `/run/redis/redis.sock`.
        ///   - username: The ACL user, if any.
        ///   - password: The password, if any.
        ///   - database: The database number.
        public init(socketPath: String, username: String? = nil, password: String? = nil, database: Int = 0) {
            self.init(host: "localhost", username: username, password: password, database: database)
            self.socketPath = socketPath
        }

        /// A configuration from a `redis://[user:password@]host[:port][/db][?db=N]` URL, its TLS
        /// form `rediss://…` (which verifies the server against the system's trust store; see
        /// ``tls`` for a CA file or a client certificate), or a `unix:///path/to/redis.sock[?db=N]`
        /// one for a Unix-domain socket.
        ///
        /// The user and password may be percent-encoded. The database is the path's number or the
        /// `db` parameter's (both: they must agree); any other parameter is an error. A `unix://` URL
        /// names no host, and its path is the socket's; its database comes from `db` only.
        ///
        /// - Throws: `CacheError` with code `invalidConfiguration` when the URL is not of that form.
        public init(url: String) throws {
            if url.lowercased().hasPrefix("unix:") {
                try self.init(unixURL: url)
                return
            }
            guard let components = URLComponents(string: url),
                let scheme = components.scheme?.lowercased(), scheme == "redis" || scheme == "rediss"
            else {
                throw CacheError.invalidConfiguration("\"\(url)\" is not a redis://, rediss:// or unix:// URL.")
            }
            guard var host = components.host, !host.isEmpty else {
                throw CacheError.invalidConfiguration("The URL \"\(url)\" names no host.")
            }
            if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            var database = 0
            let path = components.path.drop { $0 == "/" }
            if !path.isEmpty {
                guard let number = Int(path), number >= 0 else {
                    throw CacheError.invalidConfiguration(
                        "The URL \"\(url)\" has \"\(path)\" where a database number goes."
                    )
                }
                database = number
            }
            database = try Self.database(in: components, url: url, path: path.isEmpty ? nil : database)
            let user = components.percentEncodedUser.flatMap { $0.removingPercentEncoding }
            let password = components.percentEncodedPassword.flatMap { $0.removingPercentEncoding }
            // `redis://:secret@host`: a password alone logs in as the default user.
            self.init(
                host: host,
                port: components.port ?? 6379,
                username: user?.isEmpty == false ? user : nil,
                password: password,
                database: database
            )
            if scheme == "rediss" { tls = TLS() }
        }

        /// A configuration from a `unix:///path/to/redis.sock[?db=N]` URL.
        private init(unixURL url: String) throws {
            guard let components = URLComponents(string: url), components.scheme?.lowercased() == "unix" else {
                throw CacheError.invalidConfiguration("\"\(url)\" is not a unix:///path URL.")
            }
            guard (components.host ?? "").isEmpty, components.port == nil else {
                throw CacheError.invalidConfiguration(
                    "The URL \"\(url)\" names a host; a unix:// URL names a socket's path: unix:///path/to/redis.sock."
                )
            }
            let path = components.path
            guard path.hasPrefix("/"), path.count > 1 else {
                throw CacheError.invalidConfiguration("The URL \"\(url)\" names no socket path.")
            }
            let user = components.percentEncodedUser.flatMap { $0.removingPercentEncoding }
            let password = components.percentEncodedPassword.flatMap { $0.removingPercentEncoding }
            self.init(
                socketPath: path,
                username: user?.isEmpty == false ? user : nil,
                password: password,
                database: try Self.database(in: components, url: url, path: nil)
            )
        }

        /// The database a URL's `db` parameter names, checked against the one its path named (if any).
        private static func database(in components: URLComponents, url: String, path: Int?) throws -> Int {
            var database = path ?? 0
            var databaseParameter: Int?
            for item in components.queryItems ?? [] {
                guard item.name == "db" else {
                    throw CacheError.invalidConfiguration(
                        "The URL \"\(url)\" has the parameter \"\(item.name)\", which the level does not know "
                            + "(only db is)."
                    )
                }
                guard let value = item.value, let number = Int(value), number >= 0 else {
                    throw CacheError.invalidConfiguration(
                        "The URL \"\(url)\" has \"db=\(item.value ?? "")\" where a database number goes."
                    )
                }
                guard path.map({ $0 == number }) ?? true, databaseParameter.map({ $0 == number }) ?? true else {
                    throw CacheError.invalidConfiguration(
                        "The URL \"\(url)\" names two databases, \(database) and \(number)."
                    )
                }
                database = number
                databaseParameter = number
            }
            return database
        }

        /// `host:port`, the socket's path, or the Sentinels' primary, for messages.
        var server: String {
            if let socketPath { return socketPath }
            if let cluster {
                return "the Redis Cluster of " + cluster.seeds.map(\.description).joined(separator: ", ")
            }
            if let sentinel {
                return "the primary \(sentinel.primaryName) of the Sentinels at "
                    + sentinel.sentinels.map(\.description).joined(separator: ", ")
            }
            return host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        }

        /// Throws when a field is out of range.
        func validate() throws {
            func invalid(_ message: String) -> CacheError { .invalidConfiguration("Redis: \(message)") }
            guard (1...65_535).contains(port) else { throw invalid("the port \(port) is not between 1 and 65535.") }
            if let socketPath {
                guard socketPath.hasPrefix("/"), socketPath.utf8.count <= SocketAddress.longestSocketPath else {
                    throw invalid(
                        "the socket path \"\(socketPath)\" is not an absolute path of at most "
                            + "\(SocketAddress.longestSocketPath) bytes."
                    )
                }
            }
            if let sentinel {
                guard !sentinel.sentinels.isEmpty, !sentinel.primaryName.isEmpty, socketPath == nil else {
                    throw invalid("a Sentinel configuration needs Sentinels, a primary name and no socket path.")
                }
                for endpoint in sentinel.sentinels where !(1...65_535).contains(endpoint.port) || endpoint.host.isEmpty
                {
                    throw invalid("the Sentinel \(endpoint) has no host or a port out of 1...65535.")
                }
            }
            if let cluster {
                guard !cluster.seeds.isEmpty, sentinel == nil, socketPath == nil, database == 0 else {
                    throw invalid(
                        "a cluster configuration needs nodes, database 0, and neither Sentinels nor a socket path."
                    )
                }
                for endpoint in cluster.seeds where !(1...65_535).contains(endpoint.port) || endpoint.host.isEmpty {
                    throw invalid("the cluster node \(endpoint) has no host or a port out of 1...65535.")
                }
                guard cluster.topologyRefreshInterval > .zero, cluster.maximumRedirections >= 1 else {
                    throw invalid("a cluster needs a positive refresh interval and at least one redirection.")
                }
            }
            if let tls {
                if let socketPath {
                    throw invalid("TLS over a Unix-domain socket is not supported; leave tls nil for \(socketPath).")
                }
                try tls.validate()
            }
            guard database >= 0 else { throw invalid("the database number \(database) is negative.") }
            guard (1...64).contains(poolSize) else {
                throw invalid("the pool size \(poolSize) is not between 1 and 64.")
            }
            guard connectTimeout > .zero, commandTimeout > .zero, trackingPingInterval > .zero,
                trackingPingTimeout > .zero
            else { throw invalid("timeouts must be positive.") }
            guard timeoutsBeforeSkipping >= 0 else {
                throw invalid("timeoutsBeforeSkipping must be 0 or more, not \(timeoutsBeforeSkipping).")
            }
            guard maximumReplySize >= 1024 else { throw invalid("the reply limit must be at least 1 KiB.") }
            if let defaultTTL, defaultTTL <= .zero { throw invalid("the default TTL must be positive.") }
        }
    }

    /// A user and a password, as a ``CredentialsProvider`` gives them.
    public struct Credentials: Sendable, Equatable {
        /// The ACL user; `nil` logs in as `default`.
        public var username: String?
        /// The password or token.
        public var password: String

        /// Credentials from their parts.
        public init(username: String? = nil, password: String) {
            self.username = username
            self.password = password
        }
    }

    /// A function that gives the current credentials, called at each (re)connection.
    ///
    /// Two providers are equal only when they are the same value (copies of one provider).
    public struct CredentialsProvider: Sendable, Equatable {
        private final class Identity: Sendable {}

        private let identity = Identity()
        private let provide: @Sendable () throws -> Credentials

        /// A provider from a function, which must be safe to call from any thread.
        public init(_ provide: @escaping @Sendable () throws -> Credentials) {
            self.provide = provide
        }

        /// The current credentials.
        ///
        /// - Throws: What the function throws.
        public func callAsFunction() throws -> Credentials { try provide() }

        /// A name for the provider, distinct from every other's while it lives.
        var name: String { String(describing: ObjectIdentifier(identity)) }

        /// Whether both are copies of one provider.
        public static func == (lhs: CredentialsProvider, rhs: CredentialsProvider) -> Bool {
            lhs.identity === rhs.identity
        }
    }
}
