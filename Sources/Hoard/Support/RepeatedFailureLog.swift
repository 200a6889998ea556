/// A failure that may repeat thousands of times a second (every read while a server is down),
/// logged as changes of state instead of one line per failure.
///
/// The first failure is logged at once. Later ones are counted, and a line with their count and the
/// latest message is logged when one comes at least ``interval`` after the last line. A success
/// after failures logs one line that says so, with the count of failures not logged yet.
///
/// Reports may come late (a thread that finished a handshake before a server died may say so after
/// another connection found it dead). Each report may say when its attempt began: a success that
/// began before the outage was found (its first failure told, whenever that failed attempt began),
/// or a failure that began before the success that ended the last one, is old news and changes
/// nothing. The one that keeps failing reports again later.
package final class RepeatedFailureLog: Sendable {
    private struct State: Sendable {
        /// When the last line was logged; `nil` while things work.
        var lastLine: ContinuousClock.Instant?
        /// The failures since the last line.
        var unlogged = 0
        /// The failures since things last worked.
        var total = 0
        /// When the outage's first failure was told; `nil` while things work.
        var found: ContinuousClock.Instant?
        /// When the attempt whose success ended the last outage began; `nil` before one ended.
        var recoveredBy: ContinuousClock.Instant?
    }

    /// What fails, as a sentence's subject ("The shared level").
    let subject: String
    /// The least time between two lines about the same outage.
    let interval: Duration
    private let state = Locked(State())
    private let clock: @Sendable () -> ContinuousClock.Instant

    /// - Parameters:
    ///   - subject: What fails, as a sentence's subject.
    ///   - interval: The least time between two lines about the same outage.
    ///   - clock: The time now (the tests' own clock).
    package init(
        _ subject: String,
        interval: Duration = .seconds(10),
        clock: @escaping @Sendable () -> ContinuousClock.Instant = { .now }
    ) {
        self.subject = subject
        self.interval = interval
        self.clock = clock
    }

    /// Counts a failure; logs it when it is the first, or when the last line is `interval` old.
    ///
    /// - Parameter message: What failed; only built when a line is logged.
    package func failed(_ message: @autoclosure () -> String) {
        failed(message(), began: nil)
    }

    /// Counts a failure of an attempt that began at `began`, as ``failed(_:)``.
    ///
    /// - Parameters:
    ///   - message: What failed; only built when a line is logged.
    ///   - began: When the failed attempt began (`nil`: now); a failure that began before
    ///     the success that ended the last outage is ignored.
    package func failed(_ message: @autoclosure () -> String, began: ContinuousClock.Instant?) {
        let now = clock()
        let began = began ?? now
        let line = state.withLock { state -> (first: Bool, count: Int, since: Duration)? in
            guard let last = state.lastLine else {
                if let recoveredBy = state.recoveredBy, began < recoveredBy { return nil }
                state.total = 1
                state.lastLine = now
                state.found = now
                return (true, 1, .zero)
            }
            state.total += 1
            state.unlogged += 1
            guard now - last >= interval else { return nil }
            defer {
                state.lastLine = now
                state.unlogged = 0
            }
            return (false, state.unlogged, now - last)
        }
        guard let line else { return }
        if line.first {
            HoardLogger.log(.warning, "\(subject) failed: \(message())")
        } else {
            HoardLogger.log(
                .warning,
                "\(subject) failed \(line.count) more time(s) in the last \(Self.seconds(line.since)); "
                    + "the latest: \(message())"
            )
        }
    }

    /// Notes a success; after failures, logs once that things work again.
    package func succeeded() {
        succeeded(began: nil)
    }

    /// Notes a success of an attempt that began at `began`, as ``succeeded()``.
    ///
    /// - Parameter began: When the attempt that succeeded began (`nil`: now); a success that
    ///   began before the outage's first failure was told is ignored.
    package func succeeded(began: ContinuousClock.Instant?) {
        let began = began ?? clock()
        let outage = state.withLock { state -> Int? in
            guard state.lastLine != nil else { return nil }
            if let found = state.found, began < found { return nil }
            defer { state = State(recoveredBy: began) }
            return state.total
        }
        guard let outage else { return }
        HoardLogger.log(.warning, "\(subject) works again, after \(outage) failure(s).")
    }

    /// Whether a failure was logged and no success came since, for the tests.
    package var isFailing: Bool { state.withLock { $0.lastLine != nil } }

    private static func seconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let value = Double(seconds) + Double(attoseconds) * 1e-18
        return "\((value * 10).rounded() / 10) s"
    }
}
