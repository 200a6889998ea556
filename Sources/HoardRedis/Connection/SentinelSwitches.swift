import Foundation
import Hoard

/// The connections of this process that reach a primary through Sentinels, by Sentinel group, so
/// that a `+switch-master` announcement reaches every one of them: data connections and tracking
/// connections alike, whichever level made them.
enum SentinelSwitches {
    private final class Entry: Sendable {
        weak let connection: RedisConnection?
        init(_ connection: RedisConnection) { self.connection = connection }
    }

    private struct Group {
        var entries: [Entry] = []
        /// The primary the last announcement acted on moved from and to, and when: every Sentinel
        /// of the group sends the same one.
        var lastSwitch: Switch?
        /// The primary a connection of the group reached last (it passed the role check).
        var primary: RedisCacheLevel.Configuration.Endpoint?

        /// Records `move` and returns the connections to move, or none when `move` repeats the last
        /// one within ``announcementWindow`` (another Sentinel's copy of it).
        mutating func take(_ move: Switch) -> [RedisConnection] {
            if let last = lastSwitch, last.old == move.old, last.new == move.new,
                last.at.duration(to: move.at) < announcementWindow
            {
                return []
            }
            lastSwitch = move
            entries.removeAll { $0.connection == nil }
            return entries.compactMap(\.connection)
        }
    }

    /// A move of the primary that the Sentinels announced.
    struct Switch: Sendable {
        var old: RedisCacheLevel.Configuration.Endpoint
        var new: RedisCacheLevel.Configuration.Endpoint
        var at: ContinuousClock.Instant
    }

    /// How long an announcement counts: repeats within it are the other Sentinels' copies, and
    /// Sentinels that still name the old primary within it are taken as not having heard yet.
    static let announcementWindow = Duration.seconds(30)

    private static let groups = Locked<[String: Group]>([:])

    /// The key of a group: the primary's name and the Sentinels' addresses.
    static func key(_ sentinel: RedisCacheLevel.Configuration.Sentinel) -> String {
        ([sentinel.primaryName] + sentinel.sentinels.map(\.description)).joined(separator: "\u{0}")
    }

    /// Adds `connection`; it is forgotten once released.
    static func register(_ connection: RedisConnection, for sentinel: RedisCacheLevel.Configuration.Sentinel) {
        groups.withLock { groups in
            var group = groups[key(sentinel), default: Group()]
            group.entries.removeAll { $0.connection == nil }
            group.entries.append(Entry(connection))
            groups[key(sentinel)] = group
        }
    }

    /// Tells every connection of the group to connect again, once per announcement (the copies
    /// other Sentinels send within ``announcementWindow`` are ignored).
    static func announce(_ move: Switch, to key: String, reason: RedisFailure) {
        let connections = groups.withLock { groups -> [RedisConnection] in
            guard var group = groups[key] else { return [] }
            let connections = group.take(move)
            groups[key] = group.entries.isEmpty ? nil : group
            return connections
        }
        for connection in connections { connection.reconnect(reason) }
    }

    /// Notes that a connection of the group reached `primary`: the primary a Sentinel's answer is
    /// compared with in ``check(_:to:reason:)``.
    static func reached(
        _ primary: RedisCacheLevel.Configuration.Endpoint,
        for sentinel: RedisCacheLevel.Configuration.Sentinel
    ) {
        groups.withLock { groups in groups[key(sentinel)]?.primary = primary }
    }

    /// Acts on the primary a Sentinel named when the watch subscribed to it again: as on an
    /// announcement of a move to `named` from the primary the group's connections reached last,
    /// since an announcement sent while the subscription was down is lost.
    ///
    /// Nothing happens when `named` is that primary (the usual answer), when no connection has
    /// reached one yet (each asks the Sentinels as it connects), or when `named` is the primary a
    /// recent announcement moved away from (a Sentinel that has not heard of the move yet).
    ///
    /// - Parameters:
    ///   - named: The Sentinel's answer to `SENTINEL GET-MASTER-ADDR-BY-NAME`.
    ///   - key: The group (``key(_:)``).
    ///   - reason: Why the connections' requests end, when they move.
    static func check(_ named: RedisCacheLevel.Configuration.Endpoint, to key: String, reason: RedisFailure) {
        let connections = groups.withLock { groups -> [RedisConnection] in
            guard var group = groups[key], let primary = group.primary, primary != named else { return [] }
            if let last = group.lastSwitch, last.old == named, last.at.duration(to: .now) < announcementWindow {
                return []
            }
            let connections = group.take(Switch(old: primary, new: named, at: .now))
            groups[key] = group.entries.isEmpty ? nil : group
            return connections
        }
        for connection in connections { connection.reconnect(reason) }
    }

    /// The group's last announced move, while it is recent (within ``announcementWindow``).
    static func recentSwitch(_ sentinel: RedisCacheLevel.Configuration.Sentinel) -> Switch? {
        groups.withLock { groups in
            guard let move = groups[key(sentinel)]?.lastSwitch,
                move.at.duration(to: .now) < announcementWindow
            else { return nil }
            return move
        }
    }
}
