// A `ConnectionLoop` finding the primary through Sentinels before it connects.

import Foundation
import Hoard

extension ConnectionLoop {
    /// Asks the Sentinels for the address of the primary they watch, the one that answered last
    /// first; the first answer wins.
    ///
    /// Each Sentinel gets at most half of the time left, so that one that does not answer leaves
    /// time for the next. Within a while of an announced move, a Sentinel that still names the old
    /// primary has not heard of it yet, and the next one is asked. When none answers, the
    /// announced new primary, else the last primary found, is tried (its role is checked).
    /// Otherwise the attempt fails: as a refusal that cannot pass by itself when a Sentinel refused
    /// the level's settings so (a certificate not accepted, a wrong password), which `build()`
    /// then reports.
    func locatePrimary(
        _ sentinel: RedisCacheLevel.Configuration.Sentinel,
        until deadline: ContinuousClock.Instant
    ) -> Result<RedisCacheLevel.Configuration.Endpoint, RedisFailure> {
        let recentSwitch = SentinelSwitches.recentSwitch(sentinel)
        var reasons: [String] = []
        // The same login and TLS settings serve every Sentinel: one that refuses them for good
        // says the configuration cannot work, whatever the others (down, say) answered.
        var isRefused = false
        let count = sentinel.sentinels.count
        for step in 0..<count {
            let index = (preferredSentinel + step) % count
            let endpoint = sentinel.sentinels[index]
            let share =
                step == count - 1 ? deadline : ContinuousClock.now + ContinuousClock.now.duration(to: deadline) / 2
            switch askForPrimary(endpoint, sentinel, until: share) {
            case .success(let primary) where primary == recentSwitch?.old:
                reasons.append("\(endpoint): still names \(primary), which the Sentinels moved away from")
            case .success(let primary):
                preferredSentinel = index
                lastPrimary = primary
                return .success(primary)
            case .failure(let failure):
                if failure.kind == .closed { return .failure(failure) }
                if failure.isPermanentMisconfiguration { isRefused = true }
                reasons.append("\(endpoint): \(failure.description)")
            }
        }
        if let fallback = recentSwitch?.new ?? lastPrimary { return .success(fallback) }
        return .failure(
            RedisFailure(
                isRefused ? .handshake : .connect,
                "no Sentinel gave the address of the primary \(sentinel.primaryName) (\(reasons.joined(separator: "; ")))"
            )
        )
    }

    /// One Sentinel's answer to `SENTINEL GET-MASTER-ADDR-BY-NAME`, after its login if it needs one.
    private func askForPrimary(
        _ endpoint: RedisCacheLevel.Configuration.Endpoint,
        _ sentinel: RedisCacheLevel.Configuration.Sentinel,
        until deadline: ContinuousClock.Instant
    ) -> Result<RedisCacheLevel.Configuration.Endpoint, RedisFailure> {
        // A Sentinel's reply must not leave the data connection's parser in the middle of one.
        defer { parser = RESPParser(limits: Self.limits(configuration)) }
        let stream: any ByteStream
        switch open(endpoint, until: deadline) {
        case .success(let opened): stream = opened
        case .failure(let failure): return .failure(failure)
        }
        defer { stream.socket.shutdown() }
        var commands: [RESPCommand] = []
        if let password = sentinel.password {
            commands.append(RESPCommand("AUTH", sentinel.username.map { [$0, password] } ?? [password]))
        }
        commands.append(RESPCommand("SENTINEL", ["GET-MASTER-ADDR-BY-NAME", sentinel.primaryName]))
        let replies: [RESPValue]
        switch exchange(stream, commands, until: deadline) {
        case .success(let received): replies = received
        case .failure(let failure): return .failure(failure)
        }
        for reply in replies {
            if case .error(let message) = reply { return .failure(RedisFailure(.handshake, "it answered \(message)")) }
        }
        guard case .array(let parts)? = replies.last, parts.count == 2,
            let host = parts[0].bytes.map({ String(decoding: $0, as: UTF8.self) }), !host.isEmpty,
            let port = parts[1].bytes.flatMap({ Int(String(decoding: $0, as: UTF8.self)) })
        else {
            return .failure(RedisFailure(.connect, "it does not know a primary named \(sentinel.primaryName)"))
        }
        return .success(RedisCacheLevel.Configuration.Endpoint(host: host, port: port))
    }

    /// Why `server` is not the primary its `HELLO` reply should say it is, or `nil` when it is or
    /// the reply does not say.
    static func notPrimary(hello reply: RESPValue, _ server: RedisCacheLevel.Configuration.Endpoint) -> RedisFailure? {
        guard case .map(let fields) = reply else { return nil }
        var index = 0
        while index + 1 < fields.count {
            if fields[index].bytes.map({ String(decoding: $0, as: UTF8.self) }) == "role",
                let role = fields[index + 1].bytes.map({ String(decoding: $0, as: UTF8.self) })
            {
                return role == "master" ? nil : notPrimary(role: role, server)
            }
            index += 2
        }
        return nil
    }

    private static func notPrimary(role: String, _ server: RedisCacheLevel.Configuration.Endpoint) -> RedisFailure {
        RedisFailure(
            .connect,
            "\(server), which a Sentinel named the primary, is a \(role) (a failover may be under way)"
        )
    }

    /// Why `server` is not the primary its `ROLE` reply should say it is, or `nil` when it is.
    static func notPrimary(_ reply: RESPValue, _ server: RedisCacheLevel.Configuration.Endpoint) -> RedisFailure? {
        guard case .array(let parts) = reply, let first = parts.first?.bytes else {
            return RedisFailure(.protocolViolation, "ROLE had an unexpected answer")
        }
        let role = String(decoding: first, as: UTF8.self)
        return role == "master" ? nil : notPrimary(role: role, server)
    }
}
