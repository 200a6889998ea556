import Foundation
import Hoard

/// A subscription to `+switch-master` on every Sentinel of a level's group: when the Sentinels
/// move the primary, every connection to it in this process connects again, through the
/// Sentinels, at once.
///
/// Sentinels close the clients of a server they demote, and each connection checks `ROLE`; the
/// announcement covers what those miss: a primary cut off from the Sentinels but not from this
/// process, which would otherwise keep taking writes that its demotion discards.
///
/// An announcement sent while a subscription is down is lost, so each time one is confirmed (the
/// first time and after every reconnection) the watch asks that Sentinel for the primary's address
/// on the same connection: an answer other than the primary the connections reached acts as an
/// announcement (``SentinelSwitches/check(_:to:reason:)``).
///
/// Levels with the same Sentinels, primary name, Sentinel login and TLS settings share one watch
/// (``share(_:)``), so a process opens one subscription to each Sentinel however many levels it
/// makes; the first level's timeouts and client name serve it.
final class SentinelWatch: Sendable {
    private let connections: [RedisConnection]

    /// Opens one connection to each Sentinel of `configuration.sentinel` (in the background).
    private init?(_ configuration: RedisCacheLevel.Configuration) {
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

    // MARK: - Sharing

    /// What makes two levels' watches the same: the Sentinels, the primary's name and the login
    /// (all in `sentinel`), and TLS.
    fileprivate struct Key: Equatable {
        var sentinel: RedisCacheLevel.Configuration.Sentinel
        var tls: RedisCacheLevel.Configuration.TLS?
    }

    /// A watch of this process and how many shares hold it.
    private struct Shared {
        var key: Key
        var watch: SentinelWatch
        var count: Int
    }

    /// The watches of this process; a handful at most, so a list.
    private static let watches = Locked<[Shared]>([])

    /// A level's hold on the watch of its Sentinel group: the watch stops when the last share of it
    /// is released.
    final class Share: Sendable {
        fileprivate let key: Key

        fileprivate init(_ key: Key) { self.key = key }

        deinit { SentinelWatch.release(key) }
    }

    /// A share of the watch for `configuration`'s Sentinels, opening it when the process has none;
    /// `nil` without Sentinels.
    ///
    /// - Complexity: O(*w*), where *w* is the number of watches in the process.
    static func share(_ configuration: RedisCacheLevel.Configuration) -> Share? {
        guard let sentinel = configuration.sentinel else { return nil }
        let key = Key(sentinel: sentinel, tls: configuration.tls)
        let isOpen = watches.withLock { watches -> Bool in
            if let index = watches.firstIndex(where: { $0.key == key }) {
                watches[index].count += 1
                return true
            }
            guard let watch = SentinelWatch(configuration) else { return false }
            watches.append(Shared(key: key, watch: watch, count: 1))
            return true
        }
        return isOpen ? Share(key) : nil
    }

    private static func release(_ key: Key) {
        let released = watches.withLock { watches -> SentinelWatch? in
            guard let index = watches.firstIndex(where: { $0.key == key }) else { return nil }
            watches[index].count -= 1
            guard watches[index].count == 0 else { return nil }
            return watches.remove(at: index).watch
        }
        // Stops its connections here, after unlocking.
        withExtendedLifetime(released) {}
    }

    // MARK: - A Sentinel's subscription

    /// What a Sentinel's subscription hears.
    private final class Observer: TrackingObserver {
        static let channels = ["+switch-master", "+promoted-slave"]

        let key: String
        let primaryName: String
        let pingInterval: Duration
        let pingTimeout: Duration
        /// Whether the subscription was just confirmed, and the Sentinel is to be asked for the
        /// primary (only the connection's I/O thread uses it, one call at a time).
        private let isQueryDue = Locked(false)

        init(sentinel: RedisCacheLevel.Configuration.Sentinel, pingInterval: Duration, pingTimeout: Duration) {
            key = SentinelSwitches.key(sentinel)
            primaryName = sentinel.primaryName
            self.pingInterval = pingInterval
            self.pingTimeout = pingTimeout
        }

        var trackingCommand: RESPCommand { RESPCommand("SUBSCRIBE", Self.channels) }
        var isAnsweredByPush: Bool { true }

        func trackingDidConfirm() { isQueryDue.withLock { $0 = false } }
        func trackingDidFail(_ failure: RedisFailure) { isQueryDue.withLock { $0 = false } }
        func trackingWasRefused(_ reason: String) -> Bool { true }
        func trackingDidWake() {}

        /// `SENTINEL GET-MASTER-ADDR-BY-NAME`, once the subscription to every channel is confirmed:
        /// a move announced before it was is covered by the answer, one after by a message.
        func nextQuery() -> RESPCommand? {
            let isDue = isQueryDue.withLock { isDue in
                defer { isDue = false }
                return isDue
            }
            return isDue ? RESPCommand("SENTINEL", ["GET-MASTER-ADDR-BY-NAME", primaryName]) : nil
        }

        /// The Sentinel's primary, `[host, port]`; an error or a name it does not know changes
        /// nothing (the connections ask the Sentinels again at each connection).
        func trackingDidAnswer(_ reply: RESPValue) {
            guard case .array(let parts) = reply, parts.count == 2,
                let host = parts[0].bytes.map({ String(decoding: $0, as: UTF8.self) }), !host.isEmpty,
                let port = parts[1].bytes.flatMap({ Int(String(decoding: $0, as: UTF8.self)) })
            else { return }
            SentinelSwitches.check(
                .init(host: host, port: port),
                to: key,
                reason: RedisFailure(
                    .connectionLost,
                    "the Sentinels moved the primary \(primaryName) to \(host):\(port) "
                        + "(a Sentinel's answer when the level subscribed to it)"
                )
            )
        }

        /// `subscribe <channel> <count>` as each channel's subscription is confirmed; `message
        /// +switch-master "<name> <old ip> <old port> <new ip> <new port>"` at the end of a
        /// failover, and, earlier, from the Sentinel that leads it, `message +promoted-slave
        /// "slave <ip>:<port> <ip> <port> @ <name> <old ip> <old port>"` as soon as the replica is
        /// the primary: acting on the first narrows the time the old primary still takes writes.
        func trackingDidReceive(_ push: [RESPValue]) {
            if push.count == 3, push[0].bytes == Data("subscribe".utf8), case .integer(let count) = push[2],
                count == Self.channels.count
            {
                isQueryDue.withLock { $0 = true }
                return
            }
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
