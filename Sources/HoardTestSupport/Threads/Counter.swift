import Foundation

/// A thread-safe counter, for counting calls made on threads that are not the caller's (fetchers,
/// serializers, delegates).
package final class Counter: @unchecked Sendable {
    // Safe because `count` is only touched while holding `lock`.
    private let lock = NSLock()
    private var count = 0

    /// Creates a counter at zero.
    package init() {}

    /// Adds one and returns the new count.
    @discardableResult
    package func increment() -> Int {
        lock.withLock {
            count += 1
            return count
        }
    }

    /// The current count.
    package var value: Int { lock.withLock { count } }
}
