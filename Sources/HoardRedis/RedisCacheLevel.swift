import Foundation
import Hoard

/// A cache level on a Redis or Valkey server (6 or later), shared by every instance of a service:
/// the shared level of a fleet.
///
/// ```swift
/// let shared = try RedisCacheLevel(url: "redis://127.0.0.1:6379/0", namespace: "users")
/// let users = try CacheBuilder<User>()
///     .containerName("users")
///     .sharedLevel(shared)
///     .fetcher { id in try await api.user(id: id) }
///     .build()
/// ```
///
/// Every key is stored as `<namespace>:<key>`, so levels with different namespaces on one server
/// never see each other's values, and ``clear()`` removes the namespace's keys only. The bytes are
/// the UTF-8 of the namespace's and the key's NFC form (binary-safe): Swift's `==` treats
/// canonically equivalent spellings (`"caf\u{E9}"` and `"cafe\u{301}"`) as one string, and so does
/// the level, as the memory and disk levels do. Values expire to the millisecond (`SET … PX`).
///
/// The client is part of the package: RESP3 (`HELLO 3`) with a RESP2 fallback, a small pool of
/// connections that every caller shares, requests pipelined on each. No call waits longer than the
/// command timeout: a server that is down, slow or never answers makes a `CacheError` with code
/// `network`, whose message names the server and the cause; a command the server answers with an
/// error (`OOM`, `WRONGTYPE`, `NOPERM`) makes one with code `serverRefused`, with the server's
/// reply. The connections come back by themselves
/// after a failure, with a capped, jittered exponential backoff. A command whose connection was found
/// closed (`CLIENT KILL`, the server's idle `timeout`, a proxy, a failover) before any byte of its
/// reply is sent once more on a fresh connection, within its timeout: every command the level sends
/// is idempotent. A timeout is not retried.
///
/// With `CacheBuilder.fleetSingleFetch(leaseDuration:waitLimit:)`, the level also keeps each key's
/// lease, beside its value, under `<namespace>:` followed by the byte 0xFF and `lease:` (a name no
/// value key can have), and writes with small Lua scripts (`EVAL`), which the server must allow.
///
/// With ``init(cluster:namespace:)``, the level spreads its keys over the primaries of a Redis
/// Cluster by hash slot and follows the cluster's redirections and failovers (see
/// ``Configuration/Cluster``); with ``init(sentinels:primaryName:namespace:)``, it follows the
/// primary that Sentinels watch.
///
/// Releasing the level closes its connections.
public final class RedisCacheLevel: ExpiringCacheLevel, Sendable {
    /// Keys are strings.
    public typealias Key = String
    /// Values are bytes.
    public typealias Value = Data

    /// The server and the timeouts.
    public let configuration: Configuration
    /// The prefix of every key, before a colon.
    public let namespace: String
    /// Where the commands go.
    let nodes: Nodes
    private let prefix: [UInt8]
    /// On a cluster, whether the namespace holds a hash tag, which puts all its keys in one slot.
    let namespaceHasTag: Bool

    /// One server's pool of connections, or a cluster's router.
    enum Nodes: Sendable {
        case server(RedisPool)
        case cluster(ClusterRouter)
    }

    /// Connects to the server at `url` (in the background: the first calls wait for the connection,
    /// within their timeout).
    ///
    /// - Parameters:
    ///   - url: `redis://[user:password@]host[:port][/db]`.
    ///   - namespace: The prefix of the level's keys.
    ///   - poolSize: How many connections every caller shares (one for every two cores of this host,
    ///     from 1 to 4, by default: ``Configuration/defaultPoolSize``).
    ///   - connectTimeout: How long connecting and logging in may take.
    ///   - commandTimeout: How long a call waits for its reply.
    ///   - defaultTTL: The expiry of a value stored without one; `nil` keeps it until the server evicts it.
    /// - Throws: `CacheError` with code `invalidConfiguration` for a URL or field out of range.
    public convenience init(
        url: String,
        namespace: String,
        poolSize: Int = Configuration.defaultPoolSize,
        connectTimeout: Duration = .seconds(1),
        commandTimeout: Duration = .seconds(1),
        defaultTTL: Duration? = nil
    ) throws {
        var configuration = try Configuration(url: url)
        configuration.poolSize = poolSize
        configuration.connectTimeout = connectTimeout
        configuration.commandTimeout = commandTimeout
        configuration.defaultTTL = defaultTTL
        try self.init(configuration, namespace: namespace)
    }

    /// Connects to the server a configuration describes (in the background).
    ///
    /// - Parameters:
    ///   - configuration: The server, the login, the pool size and the timeouts.
    ///   - namespace: The prefix of the level's keys.
    /// - Throws: `CacheError` with code `invalidConfiguration` for a field out of range.
    public init(_ configuration: Configuration, namespace: String) throws {
        try configuration.validate()
        self.configuration = configuration
        self.namespace = namespace
        prefix = Self.prefix(namespace)
        let namespaceBytes = Array(namespace.canonicalKey.utf8)
        if let open = namespaceBytes.firstIndex(of: UInt8(ascii: "{")) {
            // A key's tag runs from its first `{` to the next `}`: one that starts in the namespace
            // and ends in the key would put a value and its lease in different slots.
            guard let close = namespaceBytes[open...].firstIndex(of: UInt8(ascii: "}")), close > open + 1 else {
                guard configuration.cluster == nil else {
                    throw CacheError.invalidConfiguration(
                        "Redis: on a cluster, a namespace with a { must close a hash tag in it ({users}, not "
                            + "{ alone or {}); \"\(namespace)\" does not."
                    )
                }
                namespaceHasTag = false
                nodes = .server(try RedisPool(configuration))
                return
            }
            namespaceHasTag = true
        } else {
            namespaceHasTag = false
        }
        nodes =
            configuration.cluster == nil
            ? .server(try RedisPool(configuration)) : .cluster(ClusterRouter(configuration))
    }

    /// The bytes that begin every key of `namespace` on the server: its canonical form and a colon.
    static func prefix(_ namespace: String) -> [UInt8] {
        Array(namespace.canonicalKey.utf8) + [UInt8(ascii: ":")]
    }

    /// The name of `key` on the server: the prefix and the key's canonical form (NFC), so that every
    /// spelling Swift's `==` treats as `key` names one server key.
    func storedKey(_ key: String) -> [UInt8] { prefix + Array(key.canonicalKey.utf8) }

    // MARK: - CacheLevel

    /// Returns the bytes stored for `key` (`GET`).
    ///
    /// - Throws: `CacheError.notFound` when the server has no value; `CacheError` with code
    ///   `network` when the server cannot be reached or answer in time.
    public func get(_ key: String) async throws -> Data {
        var command = RESPCommand("GET", arguments: 1, isIdempotent: true)
        let name = storedKey(key)
        command.append(name)
        switch try await send(command, key: key, routedBy: name, isRead: true) {
        case .null: throw CacheError.notFound(key: key)
        case let reply:
            guard let bytes = reply.bytes else { throw unexpected(reply, "GET", key) }
            return bytes
        }
    }

    /// Stores `value` for `key`, expiring after the default TTL if there is one (`SET`).
    ///
    /// - Throws: `CacheError` with code `network` when the server cannot store it in time;
    ///   `serverRefused` when it refuses to (out of memory, say).
    public func set(_ value: Data, forKey key: String) async throws {
        try await set(value, forKey: key, timeToLive: configuration.defaultTTL)
    }

    /// Stores `value` for `key` until `expiresAt` (`SET … PX`, to the millisecond).
    ///
    /// `nil` uses the default TTL; a date in the past removes the key.
    ///
    /// - Throws: `CacheError` with code `network` when the server cannot store it in time;
    ///   `serverRefused` when it refuses to (out of memory, say).
    public func set(_ value: Data, forKey key: String, expiresAt: Date?) async throws {
        guard let expiresAt else { return try await set(value, forKey: key) }
        let seconds = expiresAt.timeIntervalSinceNow
        guard seconds > 0 else { return try await removeValue(forKey: key) }
        let milliseconds = min((seconds * 1000).rounded(.up), Double(Self.longestLifetime))
        try await set(value, forKey: key, milliseconds: Int64(milliseconds))
    }

    /// Stores `value` for `key` for `timeToLive` (rounded up to a millisecond, and at most about
    /// 285,000 years, which the server can count); `nil` never expires.
    ///
    /// - Throws: `CacheError` with code `invalidConfiguration` when `timeToLive` is not positive
    ///   (nothing is stored); with code `network` when the server cannot store it in time;
    ///   `serverRefused` when it refuses to (out of memory, say).
    public func set(_ value: Data, forKey key: String, timeToLive: Duration?) async throws {
        guard let timeToLive else { return try await set(value, forKey: key, milliseconds: nil) }
        guard timeToLive > .zero else {
            throw CacheError.invalidConfiguration("Redis: a time to live must be positive, not \(timeToLive).")
        }
        try await set(value, forKey: key, milliseconds: Self.milliseconds(timeToLive))
    }

    private func set(_ value: Data, forKey key: String, milliseconds: Int64?) async throws {
        var command = RESPCommand("SET", arguments: milliseconds == nil ? 2 : 4, isIdempotent: true)
        let name = storedKey(key)
        command.append(name)
        command.append(value)
        if let milliseconds {
            command.append("PX")
            command.append(milliseconds)
        }
        _ = try await send(command, key: key, routedBy: name)
    }

    /// Removes the value of `key` (`UNLINK`); removing a missing key does nothing.
    ///
    /// - Throws: `CacheError` with code `network` when the server cannot be reached in time.
    public func removeValue(forKey key: String) async throws {
        var command = RESPCommand("UNLINK", arguments: 1, isIdempotent: true)
        let name = storedKey(key)
        command.append(name)
        _ = try await send(command, key: key, routedBy: name)
    }

    /// Removes every key of the namespace and only those (`SCAN … MATCH`, `UNLINK`; never `FLUSHDB`).
    ///
    /// A failure is logged (`HoardLogger`); ``removeAll()`` throws it instead.
    public func clear() async {
        do {
            try await removeAll()
        } catch {
            HoardLogger.log(.warning, "Redis: clearing the namespace \(namespace) failed: \(error)")
        }
    }

    /// Removes every key of the namespace and only those, throwing when the server fails.
    ///
    /// Keys stored while it runs may survive it. On a cluster, it goes to every primary even when
    /// one fails, then throws that failure; and it throws when some slots have no primary (a
    /// failover under way), whose keys it cannot reach.
    ///
    /// - Throws: `CacheError` with code `network`.
    /// - Complexity: One `SCAN` per 1000 keys of the database, one `UNLINK` per page of matches.
    public func removeAll() async throws {
        var pattern: [UInt8] = []
        for byte in prefix.dropLast() {
            if byte == UInt8(ascii: "*") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "[")
                || byte == UInt8(ascii: "]") || byte == UInt8(ascii: "\\")
            {
                pattern.append(UInt8(ascii: "\\"))
            }
            pattern.append(byte)
        }
        pattern += Array(":*".utf8)
        switch nodes {
        case .server(let pool):
            try await removeMatches(of: pattern) { try await pool.send($0, key: nil) }
        case .cluster(let router):
            // Every primary holds some of the namespace's keys (all of them, with a hash tag). One that
            // fails does not spare the others their clear; the first failure is thrown once all were
            // tried. Slots that no primary serves now (a failover under way, or a shard down) keep
            // their keys, served again by the replica that takes over or the primary that comes
            // back: the clear failed there too.
            let (primaries, unservedSlots) = try await router.primariesAndUnservedSlots()
            var firstFailure: (any Error)?
            for primary in primaries {
                do {
                    try await removeMatches(of: pattern) { try await router.send($0, key: nil, to: primary) }
                } catch {
                    firstFailure = firstFailure ?? error
                }
            }
            if let firstFailure { throw firstFailure }
            if unservedSlots > 0 {
                throw RedisFailure(.connect, "\(unservedSlots) slots have no primary now; their keys stay")
                    .error(server: configuration.server, command: "SCAN", key: nil)
            }
        }
    }

    /// Removes the keys that match `pattern` on the node that `scan` sends to: a `SCAN` per page,
    /// then an `UNLINK` of its matches (one per slot on a cluster).
    private func removeMatches(
        of pattern: [UInt8],
        scan send: (RESPCommand) async throws -> RESPValue
    ) async throws {
        var cursor = Data("0".utf8)
        repeat {
            var scan = RESPCommand("SCAN", arguments: 5, isIdempotent: true)
            scan.append(cursor)
            scan.append("MATCH")
            scan.append(pattern)
            scan.append("COUNT")
            scan.append(1000)
            let reply = try await send(scan)
            guard case .array(let parts) = reply, parts.count == 2, let next = parts[0].bytes,
                case .array(let keys) = parts[1]
            else { throw unexpected(reply, "SCAN", nil) }
            let names = keys.compactMap(\.bytes)
            switch nodes {
            case .server(let pool):
                if !names.isEmpty {
                    var unlink = RESPCommand("UNLINK", arguments: names.count, isIdempotent: true)
                    for name in names { unlink.append(name) }
                    _ = try await pool.send(unlink, key: nil)
                }
            case .cluster(let router):
                for (slot, names) in Dictionary(grouping: names, by: { ClusterSlot.of($0) }) {
                    var unlink = RESPCommand("UNLINK", arguments: names.count, isIdempotent: true)
                    for name in names { unlink.append(name) }
                    _ = try await router.send(unlink, key: nil, slot: slot)
                }
            }
            cursor = next
        } while cursor != Data("0".utf8)
    }

    /// Does nothing: the level keeps nothing in memory.
    public func onMemoryWarning() {}

    // MARK: - More than CacheLevel

    /// Returns the values found for `keys`, in key order, misses left out, in one `MGET`.
    ///
    /// - Throws: `CacheError` with code `network`; `CancellationError`.
    public func batchGetSome(_ keys: [String]) async throws -> [Data] {
        try await values(forKeys: keys).compactMap { $0 }
    }

    /// Returns the value of each key, `nil` for a miss, in one `MGET`.
    ///
    /// - Throws: `CacheError` with code `network`; `CancellationError`.
    ///
    /// On a cluster: one `MGET` per slot, all at once (a `GET` per key of a slot being migrated,
    /// when the cluster refuses commands of several keys there); the keys of a node that fails are
    /// misses, unless every node fails, which throws.
    public func values(forKeys keys: [String]) async throws -> [Data?] {
        try await valuesAndFailure(forKeys: keys).values
    }

    /// ``values(forKeys:)``, with the error of the first slot whose keys it could not read (on a
    /// cluster, their values are `nil` then, as misses are).
    func valuesAndFailure(forKeys keys: [String]) async throws -> (values: [Data?], failure: (any Error)?) {
        guard !keys.isEmpty else { return ([], nil) }
        guard case .cluster(let router) = nodes else {
            let values = try await values(forKeys: keys, names: keys.map(storedKey)) { command, key in
                try await self.send(command, key: key)
            }
            return (values, nil)
        }
        let names = keys.map(storedKey)
        let groups = Dictionary(grouping: keys.indices, by: { ClusterSlot.of(names[$0]) })
        var values = [Data?](repeating: nil, count: keys.count)
        var firstFailure: (any Error)?
        var failures = 0
        try await withThrowingTaskGroup(of: ([Int], Result<[Data?], any Error>).self) { group in
            for (slot, indices) in groups {
                group.addTask {
                    do {
                        let found = try await self.values(
                            forKeys: indices.map { keys[$0] },
                            names: indices.map { names[$0] }
                        ) { command, key in try await router.send(command, key: key, slot: slot, isRead: true) }
                        return (indices, .success(found))
                    } catch let error as CacheError
                        where ((error.underlyingError as? RedisFailure)?.reply ?? "").hasPrefix("TRYAGAIN")
                    {
                        // The slot is half migrated: a command of several keys cannot run until it
                        // is done, but each key alone can (the source answers ASK for the moved).
                        // A read that fails fails the slot's keys, as the MGET's failure would: only
                        // a key not found is a miss.
                        do {
                            var found: [Data?] = []
                            for index in indices {
                                do {
                                    found.append(try await self.get(keys[index]))
                                } catch let error as CacheError where error.code == .notFound {
                                    found.append(nil)
                                }
                            }
                            return (indices, .success(found))
                        } catch {
                            return (indices, .failure(error))
                        }
                    } catch {
                        return (indices, .failure(error))
                    }
                }
            }
            for try await (indices, result) in group {
                switch result {
                case .success(let found): for (index, value) in zip(indices, found) { values[index] = value }
                case .failure(let error as CancellationError): throw error
                case .failure(let error):
                    failures += 1
                    if firstFailure == nil { firstFailure = error }
                }
            }
        }
        if let firstFailure, failures == groups.count { throw firstFailure }
        return (values, firstFailure)
    }

    /// One `MGET` of `names` (the server names of `keys`), sent by `send`.
    private func values(
        forKeys keys: [String],
        names: [[UInt8]],
        send: (RESPCommand, String?) async throws -> RESPValue
    ) async throws -> [Data?] {
        var command = RESPCommand("MGET", arguments: names.count, isIdempotent: true)
        for name in names { command.append(name) }
        let reply = try await send(command, keys.count == 1 ? keys[0] : nil)
        guard case .array(let values) = reply, values.count == keys.count else {
            throw unexpected(reply, "MGET", nil)
        }
        return values.map(\.bytes)
    }

    /// A level of key lists whose `get` is one `MGET` and fails with `CacheError.notFound` when a
    /// key is missing; `set` and `removeValue` go key by key, all sent at once (pipelined), and throw
    /// the first error.
    ///
    /// On a cluster, a `get` whose keys of one slot cannot be read fails with that error (code
    /// `network` or `serverRefused`), not as if they were missing.
    ///
    /// - Returns: The batch level.
    public func allBatch() -> BasicCache<[String], [Data]> {
        BasicCache(
            get: { keys in
                let (values, failure) = try await self.valuesAndFailure(forKeys: keys)
                if let failure { throw failure }
                if let missing = zip(keys, values).first(where: { $0.1 == nil }) {
                    throw CacheError.notFound(key: missing.0)
                }
                return values.compactMap { $0 }
            },
            set: { values, keys in try await self.batchSet(values, forKeys: keys) },
            removeValue: { keys in
                // Sent at once, so that the connections pipeline them: one key's slow reply does not
                // hold back the others' removals.
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for key in keys { group.addTask { try await self.removeValue(forKey: key) } }
                    try await group.waitForAll()
                }
            },
            clear: { await self.clear() }
        )
    }

    /// How long `key` has left (`PTTL`, to the millisecond); `nil` when it never expires.
    ///
    /// - Throws: `CacheError.notFound` when there is no such key; `CacheError` with code `network`.
    public func timeToLive(forKey key: String) async throws -> Duration? {
        var command = RESPCommand("PTTL", arguments: 1, isIdempotent: true)
        let name = storedKey(key)
        command.append(name)
        let reply = try await send(command, key: key, routedBy: name, isRead: true)
        guard case .integer(let milliseconds) = reply else { throw unexpected(reply, "PTTL", key) }
        switch milliseconds {
        case -2: throw CacheError.notFound(key: key)
        case -1: return nil
        default: return .milliseconds(milliseconds)
        }
    }

    /// Checks that the server answers (`PING`).
    ///
    /// - Throws: `CacheError` with code `network` when it does not, within the command timeout.
    public func ping() async throws {
        let ping = RESPCommand("PING", [], isIdempotent: true)
        switch nodes {
        case .server(let pool): _ = try await pool.send(ping, key: nil)
        case .cluster(let router):
            for primary in try await router.primaries() { _ = try await router.send(ping, key: nil, to: primary) }
        }
    }

    /// Whether the level skips a stalled server (see ``Configuration/timeoutsBeforeSkipping``): calls
    /// fail at once until it answers a probe.
    ///
    /// On a cluster: whether it skips every primary.
    public var isSkippingServer: Bool {
        switch nodes {
        case .server(let pool): pool.breaker.isOpen
        case .cluster(let router): router.isSkippingEveryNode
        }
    }

    /// Sends any command (for the tests and the benchmark); on a cluster, to the primary of the slot
    /// of `routedBy`, a server key, or to any primary without one.
    ///
    /// A read (`isRead`) may go to a replica (``Configuration/Cluster/readsFromReplicas``).
    func send(
        _ command: RESPCommand,
        key: String? = nil,
        routedBy name: [UInt8]? = nil,
        isRead: Bool = false
    ) async throws -> RESPValue {
        switch nodes {
        case .server(let pool): try await pool.send(command, key: key)
        case .cluster(let router):
            try await router.send(command, key: key, slot: name.map { ClusterSlot.of($0) }, isRead: isRead)
        }
    }

    /// Sends any command and tells `completion` on the I/O thread (for the tests that time the
    /// level itself, whatever the cooperative pool is doing, and for the check of `build()`),
    /// waiting until `deadline` (`nil`: the command timeout from now).
    func send(
        _ command: RESPCommand,
        deadline: ContinuousClock.Instant? = nil,
        completion: @escaping @Sendable (Result<RESPValue, any Error>) -> Void
    ) {
        switch nodes {
        case .server(let pool): pool.send(command, key: nil, deadline: deadline, completion: completion)
        case .cluster(let router): router.sendToAnyNode(command, deadline: deadline, completion: completion)
        }
    }

    func unexpected(_ reply: RESPValue, _ command: String, _ key: String?) -> any Error {
        RedisFailure(.protocolViolation, "an unexpected reply \(reply)")
            .error(server: configuration.server, command: command, key: key)
    }
}
