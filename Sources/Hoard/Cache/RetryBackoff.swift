/// How long a cache waits between two fetch attempts.
///
/// ```swift
/// .maxRetryCount(3)
/// .retryBackoff(.exponential(initial: .milliseconds(100), maximum: .seconds(2)))
/// ```
/// The wait is cancellable: cancelling every caller of a fetch ends it at once. Tests can pass their
/// own `sleep` to run retries without waiting.
public struct RetryBackoff: Sendable {
    private let delay: @Sendable (_ retry: Int) -> Duration
    private let sleeper: @Sendable (Duration) async throws -> Void

    /// Creates a backoff from a function of the retry number (1 for the first retry).
    ///
    /// - Parameters:
    ///   - delay: The wait before each retry; negative waits count as none.
    ///   - sleep: How to wait; `Task.sleep(for:)` by default. It must throw `CancellationError` when
    ///     the task is cancelled.
    public init(
        _ delay: @escaping @Sendable (_ retry: Int) -> Duration,
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    ) {
        self.delay = delay
        self.sleeper = sleep
    }

    /// Retry at once (the default).
    public static let none = RetryBackoff { _ in .zero }

    /// Wait the same time before every retry.
    ///
    /// - Precondition: `delay` is zero or more; otherwise the program stops with a message naming it
    ///   (see "Bad arguments" in the README).
    public static func constant(_ delay: Duration) -> RetryBackoff {
        precondition(delay >= .zero, "RetryBackoff.constant needs a delay of zero or more, not \(delay).")
        return RetryBackoff { _ in delay }
    }

    /// Wait `initial`, then `multiplier` times longer before each further retry, never more than `maximum`.
    ///
    /// - Precondition: `initial` and `maximum` are zero or more, and `multiplier` is a number of 1 or
    ///   more (1 waits the same time before every retry); otherwise the program stops with a message
    ///   naming the value (see "Bad arguments" in the README).
    public static func exponential(initial: Duration, multiplier: Double = 2, maximum: Duration) -> RetryBackoff {
        precondition(
            initial >= .zero,
            "RetryBackoff.exponential needs an initial delay of zero or more, not \(initial)."
        )
        precondition(maximum >= .zero, "RetryBackoff.exponential needs a maximum of zero or more, not \(maximum).")
        precondition(multiplier >= 1, "RetryBackoff.exponential needs a multiplier of 1 or more, not \(multiplier).")
        return RetryBackoff { retry in
            let factor = multiplier
            var wait = min(initial, maximum)
            for _ in 1..<max(1, retry) {
                // Checked before multiplying: a huge product would not fit in a Duration.
                guard wait.seconds * factor < maximum.seconds else { return maximum }
                let whole = factor.rounded()
                wait = whole == factor && whole <= Double(Int32.max) ? wait * Int(whole) : wait * factor
            }
            return wait
        }
    }

    /// The same delays, waited with another `sleep` function.
    public func sleeping(with sleep: @escaping @Sendable (Duration) async throws -> Void) -> RetryBackoff {
        RetryBackoff(delay, sleep: sleep)
    }

    /// The wait before retry number `retry` (1 for the first retry).
    public func delay(beforeRetry retry: Int) -> Duration { max(.zero, delay(retry)) }

    /// Waits `duration` with the backoff's sleep function.
    func sleep(_ duration: Duration) async throws { try await sleeper(duration) }
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    fileprivate var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
