import Foundation
import Hoard

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What a connection's I/O thread does: connect, handshake, serve, and again after a failure.
///
/// Only that thread uses it; what it shares with callers is in ``RedisConnection/shared``.
final class ConnectionLoop {
    let connection: RedisConnection
    var configuration: RedisCacheLevel.Configuration { connection.configuration }
    var parser: RESPParser
    let readBuffer: UnsafeMutableRawBufferPointer
    /// Whether the handshake settled on RESP3, where pushes can arrive between replies.
    private var isRESP3 = false
    /// Why the server cannot track keys, when a tracking connection's handshake found out.
    private var trackingRefusal: String?
    /// Whether the connection got past its handshake: a TLS failure from then on is a lost
    /// connection, not a refusal.
    var isServing = false
    /// Logins in a row that lost their connection after the server asked for the client
    /// certificate the configuration lacks (see ``handshake(_:_:until:)``).
    private var lossesAfterCertificateRequest = 0
    /// With Sentinels: the one that answered last, asked first next time.
    var preferredSentinel = 0
    /// With Sentinels: the last primary they named, tried when none of them answers.
    var lastPrimary: RedisCacheLevel.Configuration.Endpoint?
    /// The host name lookups under way, by server: one at most for each (see ``BlockingCall``).
    var lookups: [RedisCacheLevel.Configuration.Endpoint: BlockingCall<[SocketAddress]>] = [:]
    /// The credentials provider's call under way: one at most (see ``BlockingCall``).
    var credentialsCall: BlockingCall<RedisCacheLevel.Credentials>?

    init(_ connection: RedisConnection) {
        self.connection = connection
        parser = RESPParser(limits: Self.limits(connection.configuration))
        readBuffer = .allocate(byteCount: 64 << 10, alignment: 8)
    }

    deinit { readBuffer.deallocate() }

    static func limits(_ configuration: RedisCacheLevel.Configuration) -> RESPLimits {
        var limits = RESPLimits()
        limits.maximumReplyCost = configuration.maximumReplySize
        return limits
    }

    /// How long a connection must serve before its failure counts as a new first one, retried at
    /// once: a connection that breaks sooner (a flapping proxy, a server that drops each client)
    /// is retried after the growing backoff, so that it cannot spin through handshakes.
    static let stableService = Duration.seconds(5)

    /// The state of each server's connections in this process, logged when it changes (the first
    /// failed attempt, a count every 10 s while attempts keep failing, the first success after),
    /// instead of a line for each attempt of each connection.
    private static let stateLogs = Locked<[String: RepeatedFailureLog]>([:])

    /// The log of the connections of one server, database, user and client name (a tracking
    /// connection's name differs from its data connections').
    static func stateLog(_ configuration: RedisCacheLevel.Configuration) -> RepeatedFailureLog {
        let key = [
            configuration.server, String(configuration.database), configuration.username ?? "",
            configuration.clientName ?? "", configuration.credentials?.name ?? "",
        ].joined(separator: "\u{0}")
        return stateLogs.withLock { logs in
            if let log = logs[key] { return log }
            let name = configuration.clientName.map { " (\($0))" } ?? ""
            let log = RepeatedFailureLog("Redis at \(configuration.server)\(name)")
            logs[key] = log
            return log
        }
    }

    /// Runs until the connection is stopped.
    func run() {
        var attempt = 0
        /// Whether the server accepted tracking once: then a later refusal is taken as passing.
        var hasTracked = false
        while !connection.isStopped {
            let failure: RedisFailure
            // Whether part of the oldest request's reply had arrived when the connection ended.
            var replyStarted = false
            // When what is logged below began: this attempt, or the loss of the connection it made
            // (a report told late is weighed by this, not by when it is told).
            var began = ContinuousClock.now
            switch establish() {
            case .failure(let failed):
                failure = failed
                attempt += 1
                if let trackingRefusal, let tracking = connection.tracking {
                    // Once it tracked on this server (a failover or a changed ACL may pass), or while
                    // subscribers whose calls returned listen (a misconfiguration that may be fixed),
                    // it is retried and logged below as a failure that repeats. Otherwise the
                    // subscribe calls waiting for the first answer throw it: the server lacks what
                    // tracking needs, and nobody else listens.
                    if !hasTracked && tracking.trackingWasRefused(trackingRefusal) { connection.stop() }
                }
            case .success(let stream):
                isServing = true
                let servedFrom = ContinuousClock.now
                Self.stateLog(configuration).succeeded(began: began)
                if connection.setStatus(.ready) {
                    failure = RedisFailure(.closed, "the level was released")
                } else if let tracking = connection.tracking {
                    hasTracked = true
                    tracking.trackingDidConfirm()
                    failure = serveTracking(stream, tracking)
                } else {
                    // Requests that queued during the handshake: their bytes go first.
                    failure = serve(stream)
                    replyStarted = parser.isInsideReply
                }
                stream.socket.shutdown()
                began = .now
                attempt = servedFrom.duration(to: began) >= Self.stableService ? 0 : attempt + 1
            }
            connection.tracking?.trackingDidFail(failure)
            // Idempotent requests with no reply byte yet stay for the next connection, if it was
            // found closed; a timeout fails them all.
            connection.failAll(failure, replyStarted: replyStarted)
            if connection.isStopped { break }
            guard attempt > 0 else {
                // A connection that served a while and broke is retried at once; the next failure waits.
                if connection.setStatus(.connecting) { break }
                continue
            }
            if connection.setStatus(.down(failure)) { break }
            Self.stateLog(configuration).failed(
                "\(failure.description); reconnecting in the background",
                began: began
            )
            let end = ContinuousClock.now + ReconnectBackoff.delay(beforeAttempt: attempt)
            // A request to reconnect (a new primary announced) ends the wait.
            while ContinuousClock.now < end && !connection.isStopped && !connection.hasReconnectRequest {
                // Times out the retries waiting for the next connection when their deadline comes.
                let (next, _) = connection.expireRequests(now: .now, isConnecting: true)
                _ = waitForEvents(on: nil, 0, wake: connection.wake, until: [end, next].compactMap { $0 }.min())
            }
            if connection.setStatus(.connecting) { break }
        }
        connection.failAll(RedisFailure(.closed, "the level was released"))
    }

    // MARK: - Waiting

    /// Waits for `events` on `socket` until `deadline`, waking earlier for a request's deadline or a
    /// wake-up, and times out the requests whose deadline passed.
    ///
    /// - Returns: The socket's events, or a failure when the connection was stopped or the oldest
    ///   request has waited twice its timeout (the server stopped answering). Before the connection
    ///   serves, the requests leave the queue at their deadline: the connect timeout bounds the
    ///   attempt, however slow the commands find it.
    func wait(
        _ socket: Socket?,
        _ events: Int16,
        until deadline: ContinuousClock.Instant?
    ) -> Result<Int16, RedisFailure> {
        let (next, _) = connection.expireRequests(now: .now, isConnecting: !isServing)
        let until = [deadline, next].compactMap { $0 }.min()
        let revents = waitForEvents(on: socket, events, wake: connection.wake, until: until)
        if connection.isStopped { return .failure(RedisFailure(.closed, "the level was released")) }
        if let reason = connection.takeReconnectRequest() { return .failure(reason) }
        let now = ContinuousClock.now
        let (_, oldest) = connection.expireRequests(now: now, isConnecting: !isServing)
        if let oldest, now > oldest + configuration.commandTimeout {
            return .failure(RedisFailure(.timeout, "the server sent no reply for \(configuration.commandTimeout * 2)"))
        }
        return .success(revents)
    }

    // MARK: - Connecting

    private func establish() -> Result<any ByteStream, RedisFailure> {
        let deadline = ContinuousClock.now + configuration.connectTimeout
        // A request to reconnect is met by this very attempt.
        _ = connection.takeReconnectRequest()
        isServing = false
        trackingRefusal = nil
        parser = RESPParser(limits: Self.limits(configuration))
        var server = RedisCacheLevel.Configuration.Endpoint(host: configuration.host, port: configuration.port)
        if let sentinel = configuration.sentinel {
            switch locatePrimary(sentinel, until: deadline) {
            case .success(let primary): server = primary
            case .failure(let failure):
                lossesAfterCertificateRequest = 0
                return .failure(failure)
            }
        }
        switch open(server, until: deadline) {
        case .success(let stream):
            return handshake(stream, server, until: deadline).map {
                // What a Sentinel names when the watch subscribes again is compared with this.
                if let sentinel = configuration.sentinel { SentinelSwitches.reached(server, for: sentinel) }
                return stream
            }
        case .failure(let failure):
            // No login in between: the next loss after a certificate request is a first one again.
            lossesAfterCertificateRequest = 0
            return .failure(failure)
        }
    }

    /// Connects to the first of the server's addresses that answers, over TLS when configured (the
    /// socket path instead, when there is one).
    func open(
        _ server: RedisCacheLevel.Configuration.Endpoint,
        until deadline: ContinuousClock.Instant
    ) -> Result<any ByteStream, RedisFailure> {
        #if canImport(Network)
        if let tls = configuration.tls {
            return NetworkTLSBridge.open(configuration, tls, server, until: deadline)
        }
        #endif
        let addresses: [SocketAddress]
        switch resolve(server, until: deadline) {
        case .success(let found): addresses = found
        case .failure(let failure): return .failure(failure)
        }
        var lastFailure = RedisFailure(.connect, "no address to connect to")
        for address in addresses {
            switch connect(to: address, until: deadline) {
            case .success(let socket):
                #if TLS && canImport(COpenSSL)
                if let tls = configuration.tls { return secure(socket, tls, host: server.host, until: deadline) }
                #endif
                return .success(socket)
            case .failure(let failure):
                if failure.kind == .closed { return .failure(failure) }
                lastFailure = failure
            }
        }
        return .failure(lastFailure)
    }

    private func connect(
        to address: SocketAddress,
        until deadline: ContinuousClock.Instant
    ) -> Result<Socket, RedisFailure> {
        let (socket, isConnected): (Socket, Bool)
        switch Socket.startConnecting(to: address) {
        case .success(let started): (socket, isConnected) = started
        case .failure(let failure): return .failure(failure)
        }
        if isConnected { return .success(socket) }
        while true {
            if ContinuousClock.now >= deadline {
                return .failure(RedisFailure(.connect, "no connection within \(configuration.connectTimeout)"))
            }
            switch wait(socket, Int16(POLLOUT), until: deadline) {
            case .failure(let failure): return .failure(failure)
            case .success(let revents) where revents != 0:
                let error = socket.connectionError()
                if error != 0 { return .failure(.system(.connect, "connect", errno: error)) }
                return .success(socket)
            case .success: continue
            }
        }
    }

    /// Logs in: `HELLO 3` with the credentials and name, or RESP2's `AUTH` when `HELLO` is refused.
    ///
    /// Then `SELECT` when a database other than 0 is asked for.
    private func handshake(
        _ stream: some ByteStream,
        _ server: RedisCacheLevel.Configuration.Endpoint,
        until deadline: ContinuousClock.Instant
    ) -> Result<Void, RedisFailure> {
        let username: String?
        let password: String?
        if let provider = configuration.credentials {
            switch credentials(from: provider, until: deadline) {
            case .success(let credentials): (username, password) = (credentials.username, credentials.password)
            case .failure(let failure): return .failure(failure)
            }
        } else {
            (username, password) = (configuration.username, configuration.password)
        }
        var hello = ["3"]
        if let password {
            hello += ["AUTH", username ?? "default", password]
        }
        if let name = configuration.clientName { hello += ["SETNAME", name] }
        let helloReply: RESPValue
        switch exchange(stream, [RESPCommand("HELLO", hello)], until: deadline) {
        case .success(let replies): helloReply = replies[0]
        case .failure(let failure) where failure.kind == .connectionLost && stream.wasAskedForMissingCertificate:
            // A TLS 1.3 server that requires a certificate refuses its absence at the client's first
            // read, and may reset the connection before its alert comes through (it closes with the
            // unread HELLO pending). A server that only asks for one (`tls-auth-clients optional`)
            // asks every client, and its connections can be lost for other reasons: so one loss is
            // a loss, retried as any other, and the second in a row is the refusal.
            lossesAfterCertificateRequest += 1
            let reason =
                "the server asks for a client certificate, and the configuration gives none (\(failure.description))"
            guard lossesAfterCertificateRequest >= 2 else { return .failure(RedisFailure(.connectionLost, reason)) }
            return .failure(RedisFailure(.handshake, "the TLS session failed: \(reason)"))
        case .failure(let failure):
            lossesAfterCertificateRequest = 0
            return .failure(failure)
        }
        lossesAfterCertificateRequest = 0
        var commands: [RESPCommand] = []
        if case .error(let message) = helloReply {
            // Redis 5 and older, or a HELLO renamed away: unknown command. Anything else (a wrong
            // password, an unknown user, too many clients) is the answer, and may pass.
            let refused = message.hasPrefix("NOPROTO") || message.lowercased().contains("unknown command")
            guard refused else { return .failure(RedisFailure(.handshake, "the server refused the login: \(message)")) }
            if connection.tracking != nil {
                trackingRefusal =
                    "the server at \(configuration.server) does not speak RESP3, which invalidation pushes need "
                    + "(HELLO 3 was refused: \(message))."
                return .failure(RedisFailure(.handshake, "HELLO 3 was refused: \(message)"))
            }
            isRESP3 = false
            if let password {
                commands.append(RESPCommand("AUTH", username.map { [$0, password] } ?? [password]))
            }
            if let name = configuration.clientName { commands.append(RESPCommand("CLIENT", ["SETNAME", name])) }
        } else {
            isRESP3 = true
            // HELLO says the server's role: no ROLE command, which ACLs often deny (`@dangerous`).
            if configuration.sentinel != nil, let failure = Self.notPrimary(hello: helloReply, server) {
                return .failure(failure)
            }
        }
        if configuration.database != 0 { commands.append(RESPCommand("SELECT", [String(configuration.database)])) }
        if configuration.readsAsReplica { commands.append(RESPCommand("READONLY", [])) }
        if let tracking = connection.tracking, !tracking.isAnsweredByPush { commands.append(tracking.trackingCommand) }
        if configuration.sentinel != nil, !isRESP3 { commands.append(RESPCommand("ROLE", [])) }
        guard !commands.isEmpty else { return .success(()) }
        switch exchange(stream, commands, until: deadline) {
        case .failure(let failure): return .failure(failure)
        case .success(let replies):
            for (command, reply) in zip(commands, replies) {
                if case .error(let message) = reply {
                    // A user denied ROLE cannot check it: the Sentinels' word stands.
                    if command.name == "ROLE", message.hasPrefix("NOPERM") { continue }
                    if connection.tracking != nil, command.name == "CLIENT", Self.refusesTracking(message) {
                        trackingRefusal =
                            "the server at \(configuration.server) refused to track keys for client-side caching "
                            + "(CLIENT TRACKING: \(message))."
                    }
                    return .failure(RedisFailure(.handshake, "\(command.name) was refused: \(message)"))
                }
                if command.name == "ROLE", let failure = Self.notPrimary(reply, server) { return .failure(failure) }
            }
            return .success(())
        }
    }

    /// Whether an error answering `CLIENT TRACKING` says the server will never track for this
    /// client (no such command or subcommand, or no permission), rather than not now (`-BUSY`,
    /// `-LOADING`, a replica in the middle of a sync).
    static func refusesTracking(_ message: String) -> Bool {
        let lowered = message.lowercased()
        return message.hasPrefix("NOPERM") || lowered.contains("unknown command")
            || lowered.contains("unknown subcommand")
    }

    /// Writes `commands` and reads one reply for each, before `deadline`.
    func exchange(
        _ stream: some ByteStream,
        _ commands: [RESPCommand],
        until deadline: ContinuousClock.Instant
    ) -> Result<[RESPValue], RedisFailure> {
        var output = commands.flatMap(\.bytes)
        var offset = 0
        var replies: [RESPValue] = []
        while replies.count < commands.count {
            if ContinuousClock.now >= deadline {
                return .failure(
                    RedisFailure(.timeout, "no answer to \(commands[0].name) within \(configuration.connectTimeout)")
                )
            }
            if offset < output.count || stream.hasPendingOutput {
                switch send(stream, &output, &offset) {
                case .failure(let failure): return .failure(failure)
                case .success: break
                }
            }
            switch wait(stream.socket, events(stream, writing: offset < output.count), until: deadline) {
            case .failure(let failure): return .failure(failure)
            case .success(let revents) where revents & Int16(POLLIN | POLLHUP | POLLERR) != 0:
                switch receive(stream) {
                case .failure(let failure): return .failure(failure)
                case .success(let received): replies += received
                }
            case .success: continue
            }
        }
        return .success(replies)
    }
}
