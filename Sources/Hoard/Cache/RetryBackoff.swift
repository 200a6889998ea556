/// How long a cache waits between two fetch attempts.
///
/// ```swift
/// .maxRetryCount(3)
/// .retryBackoff(.exponential(initial: .milliseconds(100), maximum: .seconds(2)))
/// ```
/// The wait is cancellable: cancelling every caller of a fetch ends it at once.
public struct RetryBackoff: Sendable {
    private let delay: @Sendable (_ retry: Int) -> Duration

    /// Creates a backoff from a function of the retry number (1 for the first retry).
    public init(_ delay: @escaping @Sendable (_ retry: Int) -> Duration) {
        self.delay = delay
    }

    /// Retry at once (the default).
    public static let none = RetryBackoff { _ in .zero }

    /// Wait the same time before every retry.
    public static func constant(_ delay: Duration) -> RetryBackoff {
        RetryBackoff { _ in delay }
    }

    /// Wait `initial`, then `multiplier` times longer before each further retry, never more than `maximum`.
    public static func exponential(initial: Duration, multiplier: Double = 2, maximum: Duration) -> RetryBackoff {
        RetryBackoff { retry in
            var wait = initial
            for _ in 1..<max(1, retry) {
                wait = wait * multiplier
                if wait >= maximum { return maximum }
            }
            return min(wait, maximum)
        }
    }

    /// The wait before retry number `retry` (1 for the first retry).
    public func delay(beforeRetry retry: Int) -> Duration { delay(retry) }
}
