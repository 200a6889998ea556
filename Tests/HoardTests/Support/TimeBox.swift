import Foundation
import HoardTestSupport

@testable import Hoard

/// Runs `body` on a plain thread of its own and waits at most `seconds` for it, from another plain
/// thread, so that neither the body nor the wait blocks the cooperative pool.
///
/// - Returns: `true` when the body finished in time. On `false` the body's thread is left behind,
///   stuck; the test reports the failure instead of hanging.
func finishesInTime(seconds: Double, _ body: @escaping @Sendable () -> Void) async -> Bool {
    let done = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
        body()
        done.signal()
    }
    return await onPlainThread { done.wait(timeout: .now() + seconds) == .success }
}

/// Waits on a plain thread (never the cooperative pool) until `semaphore` is signalled, at most
/// `seconds`.
///
/// - Returns: `true` when it was signalled in time.
func signalled(_ semaphore: DispatchSemaphore, within seconds: Double) async -> Bool {
    await onPlainThread { semaphore.wait(timeout: .now() + seconds) == .success }
}

/// Objects a timed-out test leaves behind on purpose: a thread stuck in a deadlock may hold their
/// locks, and a `deinit` that took one would hang the whole run instead of failing one test.
enum Abandoned {
    // Safe because the objects are only kept, never used again.
    private static let objects = Protected<[AnyObject]>([])

    /// Keeps `object` alive for the rest of the run.
    static func keep(_ object: AnyObject) { objects.withLock { $0.append(object) } }
}
