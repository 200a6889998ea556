import Dispatch
import HoardTestSupport
import Testing

@testable import Hoard

/// Checks that a cache still serves a set and completes a flush, each within `seconds`, after a
/// re-entrancy cell.
///
/// - Returns: What did not return in time, or `nil` when both did.
func stillUsable(_ cache: Cache<String>, within seconds: Double) async -> String? {
    let served = Protected<String?>(nil)
    guard
        await finishesInTime(
            seconds: seconds,
            {
                cache["after"] = "after"
                served.withLock { $0 = cache["after"] }
            }
        )
    else { return "a set or get after the cell did not return" }
    #expect(served.withLock { $0 } == "after")
    let flushed = DispatchSemaphore(value: 0)
    // On Hoard's own executor: the cooperative pool (one thread per core) can be busy for long
    // stretches with other suites' synchronous work, most of all under ThreadSanitizer.
    FetchTask.run {
        await cache.flush()
        flushed.signal()
    }
    guard await signalled(flushed, within: seconds) else { return "flush did not return" }
    return nil
}
