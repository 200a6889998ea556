import Foundation
import Hoard

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What a tracking connection (the one that receives a namespace's invalidations) tells, from its
/// I/O thread, one call at a time.
protocol TrackingObserver: AnyObject, Sendable {
    /// Sent at the end of each handshake: `CLIENT TRACKING ON BCAST PREFIX …`.
    var trackingCommand: RESPCommand { get }
    /// Whether ``trackingCommand`` is answered by a push, not a reply (`SUBSCRIBE` in RESP3): it is
    /// then sent once the connection serves, and its answer goes to ``trackingDidReceive(_:)``.
    var isAnsweredByPush: Bool { get }
    /// How long the connection may stay silent before it pings the server.
    var pingInterval: Duration { get }
    /// How long the server has to answer a ping before the connection counts as lost.
    var pingTimeout: Duration { get }
    /// The server accepted the tracking command on a new connection: every change from now on is
    /// announced on it.
    func trackingDidConfirm()
    /// The connection failed or closed (or never came up): changes may go unannounced.
    func trackingDidFail(_ failure: RedisFailure)
    /// The server cannot track (no RESP3, or the tracking command unknown or not permitted) and never
    /// tracked on this connection before. Returns whether the refusal is final: the connection then
    /// stops; otherwise it retries, as after a failure.
    func trackingWasRefused(_ reason: String) -> Bool
    /// A push message arrived (an `invalidate`, say), its elements in order.
    func trackingDidReceive(_ push: [RESPValue])
    /// The connection was woken (``RedisConnection/wake``) or pinged: a chance to tell newcomers.
    func trackingDidWake()
    /// A command to send now, asked before each wait while the connection serves, or `nil`: its
    /// reply goes to ``trackingDidAnswer(_:)``.
    func nextQuery() -> RESPCommand?
    /// The reply to the last command ``nextQuery()`` gave, error replies included.
    func trackingDidAnswer(_ reply: RESPValue)
}

extension TrackingObserver {
    var isAnsweredByPush: Bool { false }
    func nextQuery() -> RESPCommand? { nil }
    func trackingDidAnswer(_ reply: RESPValue) {}
}

extension ConnectionLoop {
    /// What a reply on its way to a tracking connection answers.
    private enum AwaitedReply { case ping, query }

    /// Serves a tracking connection: pushes go to `tracking`, and pings keep it honest.
    ///
    /// A `PING` goes out ``TrackingObserver/pingInterval`` after the last ping's answer (pushes do
    /// not delay it), and a server that does not answer within ``TrackingObserver/pingTimeout``
    /// ends the connection. The deadline is judged after reading what has arrived.
    ///
    /// Besides the pings, only the observer's queries (``TrackingObserver/nextQuery()``) are sent:
    /// replies come in the order of the commands, so each goes to the one it answers.
    func serveTracking(_ stream: some ByteStream, _ tracking: any TrackingObserver) -> RedisFailure {
        let ping = RESPCommand("PING", []).bytes
        var output: [UInt8] = tracking.isAnsweredByPush ? tracking.trackingCommand.bytes : []
        var offset = 0
        var nextPing = ContinuousClock.now + tracking.pingInterval
        var pingDeadline: ContinuousClock.Instant?
        var awaited: [AwaitedReply] = []
        while true {
            tracking.trackingDidWake()
            if let query = tracking.nextQuery() {
                output += query.bytes
                awaited.append(.query)
            }
            let now = ContinuousClock.now
            if pingDeadline == nil, now >= nextPing {
                output += ping
                awaited.append(.ping)
                pingDeadline = now + tracking.pingTimeout
            }
            if offset < output.count || stream.hasPendingOutput,
                case .failure(let failure) = send(stream, &output, &offset)
            {
                return failure
            }
            let events = events(stream, writing: offset < output.count)
            if case .failure(let failure) = wait(stream.socket, events, until: pingDeadline ?? nextPing) {
                return failure
            }
            // Read whatever came, then judge the deadline: a handler that held this thread past it
            // (a long clear) must not pass for a silent server when the answer is waiting.
            switch receive(stream) {
            case .failure(let failure): return failure
            case .success(let replies):
                for reply in replies {
                    if awaited.first == .query {
                        awaited.removeFirst()
                        tracking.trackingDidAnswer(reply)
                        continue
                    }
                    if case .error(let message) = reply {
                        return RedisFailure(.server, "the tracking connection's PING was answered \(message)")
                    }
                    // Pushes count as signs of life too, but only a ping's answer settles it.
                    if !awaited.isEmpty { awaited.removeFirst() }
                    pingDeadline = nil
                    nextPing = .now + tracking.pingInterval
                }
            }
            if let pingDeadline, ContinuousClock.now >= pingDeadline {
                return RedisFailure(
                    .timeout,
                    "the tracking connection's PING had no answer within \(tracking.pingTimeout)"
                )
            }
        }
    }
}
