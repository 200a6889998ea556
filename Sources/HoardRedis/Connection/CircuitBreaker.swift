import Foundation
import Hoard

/// Skips a server that stopped answering (stalled: `SIGSTOP`, a long `DEBUG SLEEP`, a network that
/// drops packets), so that callers do not each wait the full command timeout.
///
/// After `threshold` commands in a row (``RedisCacheLevel/Configuration/timeoutsBeforeSkipping``) had no reply within their timeout, the circuit opens: every
/// request fails at once with ``RedisFailure/Kind/skipped`` and the pool probes the server with a
/// `PING`, first after ``firstPause``, then after twice the last pause (at most ``maximumPause``),
/// until one is answered. A reply of any kind (an error reply included, to a probe or to a request
/// sent before the circuit opened) ends a run of timeouts and closes the circuit. A timeout is any
/// failure for the server's silence: no reply within the command timeout, no answer to the
/// handshake, or a refusal by a connection given up for silence that waits to reconnect. A server
/// that refuses connections needs no circuit: its connections fail requests at once while they
/// wait.
final class CircuitBreaker: Sendable {
    /// The timeouts in a row that open the circuit; 0 never opens it.
    let threshold: Int
    /// The pause before the first probe.
    static let firstPause = Duration.seconds(1)
    /// The longest pause between two probes.
    static let maximumPause = Duration.seconds(30)

    private struct State {
        var timeoutsInARow = 0
        /// The pause before the next probe while the circuit is open; `nil` while it is closed.
        var pause: Duration?
        /// Counts the openings: a probe of an earlier one is ignored.
        var opening = 0

        mutating func close() {
            timeoutsInARow = 0
            pause = nil
        }
    }

    private let state = Locked(State())

    init(threshold: Int) { self.threshold = threshold }

    /// Whether the circuit is open, for the tests.
    var isOpen: Bool { state.withLock { $0.pause != nil } }

    /// The failure a request gets at once while the circuit is open; `nil` while it is closed.
    func refusal() -> RedisFailure? {
        guard state.withLock({ $0.pause != nil }) else { return nil }
        return RedisFailure(
            .skipped,
            "skipped: the server did not answer \(threshold) commands in a row within their timeout, "
                + "so it is left alone and probed in the background until it answers"
        )
    }

    /// Counts a request's outcome.
    ///
    /// - Parameters:
    ///   - result: The outcome.
    ///   - hadTime: Whether the request had time enough for its silence to count. A request sent
    ///     with little of its time left, its caller having spent the rest waiting (for a Redis
    ///     Cluster's map through an election, for a failover), may time out on a server that
    ///     answers as it should; such a timeout neither counts nor ends a run.
    /// - Returns: The opening and the pause before its first probe, when this outcome opened the
    ///   circuit.
    func record(_ result: Result<RESPValue, RedisFailure>, hadTime: Bool = true) -> (opening: Int, pause: Duration)? {
        state.withLock { state in
            switch result {
            case .success:
                state.close()
            case .failure(let failure) where failure.kind == .server:
                // An error reply is an answer.
                state.close()
            case .failure(let failure) where failure.kind == .timeout && hadTime:
                state.timeoutsInARow += 1
                guard threshold > 0, state.pause == nil, state.timeoutsInARow >= threshold else { return nil }
                state.pause = Self.firstPause
                state.opening += 1
                return (state.opening, Self.firstPause)
            case .failure:
                break
            }
            return nil
        }
    }

    /// Counts a probe's outcome.
    ///
    /// - Parameters:
    ///   - result: The probe's outcome.
    ///   - opening: The opening the probe was sent for.
    /// - Returns: The pause before the next probe, or `nil` when the circuit is closed (the server
    ///   answered, now or since the probe was sent).
    func probed(_ result: Result<RESPValue, RedisFailure>, opening: Int) -> Duration? {
        state.withLock { state in
            guard state.opening == opening, let pause = state.pause else { return nil }
            switch result {
            case .success:
                state.close()
                return nil
            case .failure(let failure) where failure.kind == .server:
                state.close()
                return nil
            case .failure:
                let next = min(pause * 2, Self.maximumPause)
                state.pause = next
                return next
            }
        }
    }
}
