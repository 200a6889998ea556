import Dispatch
import Foundation
import HoardTestSupport

@testable import Hoard

/// Installs, for `target` (a cache, a disk store or a disk level), a hook that the first time
/// `event` is reached runs `landing` and holds the thread that reached it until `landing` is done:
/// a read lands in the middle of a clear or a catch-up.
///
/// Remove it with `ClearTestHooks.installed.set(nil, for: target)` before `target` goes.
/// - Returns: What `landing` returned, once it has (`nil` until then, or when `event` never came).
func holdOnce(
    _ target: AnyObject,
    at event: ClearTestHooks.Event,
    landing: @escaping @Sendable () async -> Result<String, any Error>
) -> Protected<Result<String, any Error>?> {
    let landed = Protected<Result<String, any Error>?>(nil)
    let reached = Protected(false)
    ClearTestHooks.installed.set(
        { current in
            guard current == event else { return }
            let isFirst = reached.withLock { wasReached in
                defer { wasReached = true }
                return !wasReached
            }
            guard isFirst else { return }
            let done = DispatchSemaphore(value: 0)
            Task {
                let result = await landing()
                landed.withLock { $0 = result }
                done.signal()
            }
            _ = done.wait(timeout: .now() + .seconds(600))
        },
        for: target
    )
    return landed
}

/// Calls `cache.removeAll()` on a plain thread; at `event`, starts (or lets go) the read that
/// `landing` returns and holds the clear there until the read has answered.
///
/// - Returns: What the read answered, or `nil` when the clear never reached `event`.
func removeAll(
    _ cache: Cache<String>,
    at event: ClearTestHooks.Event,
    landing: @escaping @Sendable () -> Task<String, any Error>
) async -> Result<String, any Error>? {
    let landed = holdOnce(cache, at: event) { await landing().result }
    defer { ClearTestHooks.installed.set(nil, for: cache) }
    await onPlainThread { cache.removeAll() }
    return landed.withLock { $0 }
}
