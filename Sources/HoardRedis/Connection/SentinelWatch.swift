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

/// A subscription to `+switch-master` on every Sentinel of a level's group: when the Sentinels
/// move the primary, every connection to it in this process connects again, through the
/// Sentinels, at once.
///
/// Sentinels close the clients of a server they demote, and each connection checks `ROLE`; the
/// announcement covers what those miss: a primary cut off from the Sentinels but not from this
/// process, which would otherwise keep taking writes that its demotion discards.
final class SentinelWatch: Sendable {
    private let connections: [RedisConnection]

    /// Opens one connection to each Sentinel of `configuration.sentinel` (in the background).
    init?(_ configuration: RedisCacheLevel.Configuration) {
        guard let sentinel = configuration.sentinel else { return nil }
        var connections: [RedisConnection] = []
        for endpoint in sentinel.sentinels {
            var watching = RedisCacheLevel.Configuration(
                host: endpoint.host,
                port: endpoint.port,
                username: sentinel.username,
                password: sentinel.password
            )
            watching.tls = configuration.tls
            watching.connectTimeout = configuration.connectTimeout
            watching.commandTimeout = configuration.commandTimeout
            watching.trackingPingInterval = configuration.trackingPingInterval
            watching.trackingPingTimeout = configuration.trackingPingTimeout
            watching.clientName = configuration.clientName.map { "\($0)-sentinel" }
            let observer = Observer(
                sentinel: sentinel,
                pingInterval: watching.trackingPingInterval,
                pingTimeout: watching.trackingPingTimeout
            )
            guard let connection = RedisConnection(watching, tracking: observer) else { continue }
            connections.append(connection)
        }
        self.connections = connections
    }

    deinit {
        for connection in connections { connection.stop() }
    }

    /// What a Sentinel's subscription hears.
    private final class Observer: TrackingObserver {
        let key: String
        let primaryName: String
        let pingInterval: Duration
        let pingTimeout: Duration

        init(sentinel: RedisCacheLevel.Configuration.Sentinel, pingInterval: Duration, pingTimeout: Duration) {
            key = SentinelSwitches.key(sentinel)
            primaryName = sentinel.primaryName
            self.pingInterval = pingInterval
            self.pingTimeout = pingTimeout
        }

        var trackingCommand: RESPCommand { RESPCommand("SUBSCRIBE", ["+switch-master", "+promoted-slave"]) }
        var isAnsweredByPush: Bool { true }

        func trackingDidConfirm() {}
        func trackingDidFail(_ failure: RedisFailure) {}
        func trackingWasRefused(_ reason: String) {}
        func trackingDidWake() {}

        /// `message +switch-master "<name> <old ip> <old port> <new ip> <new port>"` at the end of a
        /// failover, and, earlier, from the Sentinel that leads it, `message +promoted-slave
        /// "slave <ip>:<port> <ip> <port> @ <name> <old ip> <old port>"` as soon as the replica is
        /// the primary: acting on the first narrows the time the old primary still takes writes.
        func trackingDidReceive(_ push: [RESPValue]) {
            let parts = push.map { $0.bytes.map { String(decoding: $0, as: UTF8.self) } ?? "" }
            guard parts.count == 3, parts[0] == "message" else { return }
            let fields = parts[2].split(separator: " ").map(String.init)
            let name: String
            let old: (String, String)
            let new: (String, String)
            switch parts[1] {
            case "+switch-master" where fields.count == 5:
                (name, old, new) = (fields[0], (fields[1], fields[2]), (fields[3], fields[4]))
            case "+promoted-slave" where fields.count == 8 && fields[0] == "slave" && fields[4] == "@":
                (name, old, new) = (fields[5], (fields[6], fields[7]), (fields[2], fields[3]))
            default: return
            }
            guard name == primaryName, let oldPort = Int(old.1), let newPort = Int(new.1) else { return }
            let move = SentinelSwitches.Switch(
                old: .init(host: old.0, port: oldPort),
                new: .init(host: new.0, port: newPort),
                at: .now
            )
            SentinelSwitches.announce(
                move,
                to: key,
                reason: RedisFailure(
                    .connectionLost,
                    "the Sentinels moved the primary \(primaryName) to \(new.0):\(new.1)"
                )
            )
        }
    }
}
