import Dispatch
import Foundation
import HoardTestSupport

@testable import Hoard

/// Calls `cache.removeAll()` on a plain thread; at `event`, starts (or lets go) the read that
/// `landing` returns and holds the clear there until the read has answered.
///
/// - Returns: What the read answered, or `nil` when the clear never reached `event`.
func removeAll(
    _ cache: Cache<String>,
    at event: ClearTestHooks.Event,
    landing: @escaping @Sendable () -> Task<String, any Error>
) async -> Result<String, any Error>? {
    let landed = Protected<Result<String, any Error>?>(nil)
    ClearTestHooks.installed.set(
        { reached in
            guard reached == event else { return }
            let read = landing()
            let answered = DispatchSemaphore(value: 0)
            Task {
                let result = await read.result
                landed.withLock { $0 = result }
                answered.signal()
            }
            _ = answered.wait(timeout: .now() + .seconds(600))
        },
        for: cache
    )
    defer { ClearTestHooks.installed.set(nil, for: cache) }
    await onPlainThread { cache.removeAll() }
    return landed.withLock { $0 }
}
