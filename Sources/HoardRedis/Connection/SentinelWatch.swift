import Foundation
import Hoard

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
