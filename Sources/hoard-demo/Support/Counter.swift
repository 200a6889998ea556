import Foundation

/// A thread-safe counter: fetchers and delegates run on Hoard's threads, not ours.
final class Counter: @unchecked Sendable {
    // Safe because `value` is only read or written while holding `lock`.
    private let lock = NSLock()
    private var value = 0

    /// Adds one and returns the new count.
    @discardableResult
    func increment() -> Int {
        lock.lock()
        defer { lock.unlock() }
        value += 1
        return value
    }

    var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return value
    }
}
