import Foundation
import Hoard

// Leases for `CacheBuilder.fleetSingleFetch(leaseDuration:waitLimit:)`: one origin fetch per key for
// the whole fleet.
//
// The lease of a key is a string key of its own beside the value, `<namespace>:` then the byte 0xFF,
// `lease:` and the key's canonical form, holding the holder's token, with the lease's duration as
// its `PX`. No value key can be named so: a key is a Swift string, whose UTF-8 never holds 0xFF.
// It starts with the namespace's prefix, so `removeAll()` removes it too; the tracking connection
// watches that prefix, and drops its changes (`TrackingHub`): a lease is never announced as a change
// of a key.
//
// The compare-and-set is a Lua script (`EVAL`), not `WATCH`/`MULTI`: the level's connections are
// shared and pipelined, so a `WATCH` would watch for every caller on the connection, and a
// `MULTI` would take in their commands. A script runs atomically on the server whatever else is on
// the connection. It is sent whole each time rather than by `EVALSHA`: the server hashes it and
// reuses what it compiled, and there is no `NOSCRIPT` to recover from after a restart or a
// failover. Keys and arguments travel as `KEYS` and `ARGV`, never inside the script.
extension RedisCacheLevel: LeasingCacheLevel {
    /// The byte after the namespace's colon that marks a lease: never in the UTF-8 of a key.
    static let leaseMark: UInt8 = 0xFF

    /// The name of the lease of `key` on the server (see the file's comment).
    ///
    /// On a cluster, the lease must be in its value's slot, so that one script can touch both: its
    /// name carries, after `lease:`, the hash tag of that slot in braces (unless the namespace has a
    /// tag of its own, which puts every key of the level in one slot already).
    func leaseKey(_ key: String) -> [UInt8] {
        var name = Array(namespace.canonicalKey.utf8)
        name.append(UInt8(ascii: ":"))
        name.append(Self.leaseMark)
        name += Array("lease:".utf8)
        if case .cluster = nodes, !namespaceHasTag {
            name.append(UInt8(ascii: "{"))
            name += Array(ClusterSlot.tags[ClusterSlot.of(storedKey(key))].utf8)
            name.append(UInt8(ascii: "}"))
        }
        name += Array(key.canonicalKey.utf8)
        return name
    }

    /// Stores the value (`KEYS[1]`, `ARGV[2]`, for `ARGV[3]` ms, none when "0") if `ARGV[1]` holds the
    /// lease (`KEYS[2]`), and ends the lease; 1 when stored, 0 when the lease was gone.
    static let setIfLeasedScript = """
        if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
        redis.call('DEL', KEYS[2])
        if ARGV[3] == '0' then redis.call('SET', KEYS[1], ARGV[2])
        else redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end
        return 1
        """

    /// Stores the value (`KEYS[1]`, `ARGV[1]`, for `ARGV[2]` ms, none when "0") and ends any lease
    /// (`KEYS[2]`).
    static let setEndingLeaseScript = """
        if ARGV[2] == '0' then redis.call('SET', KEYS[1], ARGV[1])
        else redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) end
        redis.call('DEL', KEYS[2])
        return 1
        """

    /// Ends the lease (`KEYS[1]`) if `ARGV[1]` holds it; 1 when it did.
    static let releaseScript = """
        if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
        return 0
        """

    /// Takes the lease of `key` for `duration` (`SET <lease> <token> NX PX`), unless another token
    /// holds it.
    ///
    /// Not sent twice when its connection is found closed: a first run that did take the lease
    /// would make the second answer that another holds it.
    ///
    /// - Returns: `true` when `token` now holds the lease.
    /// - Throws: `CacheError` with code `network` or `serverRefused`.
    package func takeLease(forKey key: String, token: String, duration: Duration) async throws -> Bool {
        var command = RESPCommand("SET", arguments: 5)
        command.append(leaseKey(key))
        command.append(token)
        command.append("NX")
        command.append("PX")
        command.append(Self.milliseconds(duration))
        switch try await send(command, key: key, routedBy: storedKey(key)) {
        case .null: return false
        case .simpleString: return true
        case let reply: throw unexpected(reply, "SET NX", key)
        }
    }

    /// Stores `value` until `expiresAt` (`nil`: the default TTL) if `token` still holds the lease of
    /// `key`, and ends the lease, atomically (a Lua script).
    ///
    /// A value already expired is not stored; the lease is released.
    ///
    /// - Returns: `false` when the lease was gone (expired, or ended by a write of the key).
    /// - Throws: `CacheError` with code `network`, or `serverRefused` (a server that does not allow
    ///   scripts, say).
    package func set(
        _ value: Data,
        forKey key: String,
        expiresAt: Date?,
        ifLeasedTo token: String
    ) async throws
        -> Bool
    {
        guard let milliseconds = lifetime(until: expiresAt) else {
            try await releaseLease(forKey: key, token: token)
            return false
        }
        // Not sent twice: a first run that stored the value would make the second refuse it.
        var command = RESPCommand("EVAL", arguments: 7)
        command.append(Self.setIfLeasedScript)
        command.append("2")
        command.append(storedKey(key))
        command.append(leaseKey(key))
        command.append(token)
        command.append(value)
        command.append(milliseconds)
        switch try await send(command, key: key, routedBy: storedKey(key)) {
        case .integer(let stored): return stored == 1
        case let reply: throw unexpected(reply, "EVAL (set if leased)", key)
        }
    }

    /// Ends the lease of `key` if `token` still holds it (a Lua script).
    ///
    /// Sent again on a fresh connection when its connection was found closed: a second run leaves
    /// the server as the first did, and its answer is not used.
    ///
    /// - Throws: `CacheError` with code `network` or `serverRefused`.
    package func releaseLease(forKey key: String, token: String) async throws {
        var command = RESPCommand("EVAL", arguments: 4, isIdempotent: true)
        command.append(Self.releaseScript)
        command.append("1")
        command.append(leaseKey(key))
        command.append(token)
        _ = try await send(command, key: key, routedBy: storedKey(key))
    }

    /// Stores `value` until `expiresAt` (`nil`: the default TTL) and ends any lease of `key`,
    /// atomically (a Lua script): a lease holder whose fetch began before this write cannot store
    /// its older value after it.
    ///
    /// A date in the past removes the key.
    ///
    /// - Throws: `CacheError` with code `network`, or `serverRefused`.
    package func setEndingLease(_ value: Data, forKey key: String, expiresAt: Date?) async throws {
        guard let milliseconds = lifetime(until: expiresAt) else {
            return try await removeValueEndingLease(forKey: key)
        }
        var command = RESPCommand("EVAL", arguments: 6, isIdempotent: true)
        command.append(Self.setEndingLeaseScript)
        command.append("2")
        command.append(storedKey(key))
        command.append(leaseKey(key))
        command.append(value)
        command.append(milliseconds)
        do {
            _ = try await send(command, key: key, routedBy: storedKey(key))
        } catch  where Self.isTryAgain(error) {
            // A cluster slot half migrated refuses a command of two keys when one of them is
            // missing (a lease usually is). Ending the lease first, then storing, leaves the same
            // outcome: a holder that stores before the first step is overwritten by the second,
            // one after it finds its lease gone.
            try await endLease(forKey: key)
            try await set(value, forKey: key, expiresAt: expiresAt)
        }
    }

    /// Whether `error` is a cluster's `TRYAGAIN`: a command of several keys in a slot being
    /// migrated, some of them missing.
    static func isTryAgain(_ error: any Error) -> Bool {
        ((error as? CacheError)?.underlyingError as? RedisFailure)?.reply?.hasPrefix("TRYAGAIN") == true
    }

    /// Removes the lease of `key`, whoever holds it (one key: `UNLINK`).
    private func endLease(forKey key: String) async throws {
        var command = RESPCommand("UNLINK", arguments: 1, isIdempotent: true)
        command.append(leaseKey(key))
        _ = try await send(command, key: key, routedBy: storedKey(key))
    }

    /// Removes the value of `key` and its lease in one `UNLINK`.
    ///
    /// - Throws: `CacheError` with code `network`.
    package func removeValueEndingLease(forKey key: String) async throws {
        var command = RESPCommand("UNLINK", arguments: 2, isIdempotent: true)
        command.append(storedKey(key))
        command.append(leaseKey(key))
        do {
            _ = try await send(command, key: key, routedBy: storedKey(key))
        } catch  where Self.isTryAgain(error) {
            // As in `setEndingLease`: the lease first, then the value.
            try await endLease(forKey: key)
            try await removeValue(forKey: key)
        }
    }

    /// The `PX` of a value stored until `expiresAt`: 0 for none (no default TTL), `nil` when it has
    /// expired already.
    private func lifetime(until expiresAt: Date?) -> Int64? {
        guard let expiresAt else { return configuration.defaultTTL.map(Self.milliseconds) ?? 0 }
        let seconds = expiresAt.timeIntervalSinceNow
        guard seconds > 0 else { return nil }
        return Int64(min((seconds * 1000).rounded(.up), Double(Self.longestLifetime)))
    }

    /// The longest `PX` sent, about 285,000 years: the server adds its clock to it, so a time to
    /// live whose milliseconds barely fit in an `Int64` would overflow there and be refused.
    static var longestLifetime: Int64 { 9_000_000_000_000_000 }

    /// `duration` (positive) in whole milliseconds, rounded up, at least 1 and at most
    /// ``longestLifetime``.
    static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        guard seconds < longestLifetime / 1000 else { return longestLifetime }
        let rest = (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return max(1, min(longestLifetime, seconds * 1000 + rest))
    }
}
