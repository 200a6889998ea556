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
            if let last = group.lastSwitch, last.old == move.old, last.new == move.new,
                last.at.duration(to: move.at) < announcementWindow
            {
                return []
            }
            group.lastSwitch = move
            group.entries.removeAll { $0.connection == nil }
            if group.entries.isEmpty {
                groups[key] = nil
                return []
            }
            groups[key] = group
            return group.entries.compactMap(\.connection)
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
