import Foundation
import Hoard

/// Skips a server that stopped answering (stalled: `SIGSTOP`, a long `DEBUG SLEEP`, a network that
/// drops packets), so that callers do not each wait the full command timeout.
///
/// After `threshold` commands in a row (``RedisCacheLevel/Configuration/timeoutsBeforeSkipping``) had no reply within their timeout, the circuit opens: every
/// request fails at once with ``RedisFailure/Kind/skipped`` and the pool probes the server with a
/// `PING`, first after ``firstPause``, then after twice the last pause (at most ``maximumPause``),
/// until one is answered; that closes the circuit. A reply of any kind (an error reply included)
/// ends a run of timeouts. A server that refuses connections needs no circuit: its connections
/// fail requests at once while they wait to reconnect.
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
    /// - Returns: The pause before the first probe when this outcome opened the circuit.
    func record(_ result: Result<RESPValue, RedisFailure>) -> Duration? {
        state.withLock { state in
            switch result {
            case .success:
                state.timeoutsInARow = 0
            case .failure(let failure) where failure.kind == .timeout:
                state.timeoutsInARow += 1
                guard threshold > 0, state.pause == nil, state.timeoutsInARow >= threshold else { return nil }
                state.pause = Self.firstPause
                return Self.firstPause
            case .failure(let failure) where failure.kind == .server:
                // An error reply is an answer.
                state.timeoutsInARow = 0
            case .failure:
                break
            }
            return nil
        }
    }

    /// Counts a probe's outcome.
    ///
    /// - Returns: The pause before the next probe, or `nil` when the server answered and the circuit
    ///   closed.
    func probed(_ result: Result<RESPValue, RedisFailure>) -> Duration? {
        state.withLock { state in
            let answered: Bool
            switch result {
            case .success: answered = true
            case .failure(let failure): answered = failure.kind == .server
            }
            if answered {
                state = State()
                return nil
            }
            let next = min((state.pause ?? Self.firstPause) * 2, Self.maximumPause)
            state.pause = next
            return next
        }
    }
}
