import Foundation

/// A value behind a lock, for tests, the benchmark and the worker.
///
/// Hoard's own `Locked` counts, in debug builds, as a lock the library holds: a test that held one
/// around a call into a cache would trip the check that no user code runs under a Hoard lock. This
/// one is a plain `NSLock`, invisible to that check.
package final class Protected<State>: @unchecked Sendable {
    // Safe because `state` is only reached through `withLock`, which holds `lock`. Tests put
    // non-Sendable state in it on purpose (objects kept alive, closures), never used concurrently.
    private let lock = NSLock()
    private var state: State

    /// Wraps an initial state.
    package init(_ state: State) {
        self.state = state
    }

    /// Runs `body` with exclusive access to the state.
    package func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&state)
    }
}
