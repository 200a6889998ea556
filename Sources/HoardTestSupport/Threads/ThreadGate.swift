import Foundation

/// A one-shot gate for plain threads: `wait()` blocks the calling thread until `open()`.
///
/// For code that runs synchronously on Hoard's threads (serializers). Never wait on it from a task:
/// blocking the cooperative pool is how tests deadlock on a 2-core machine.
package final class ThreadGate: @unchecked Sendable {
    // Safe because `isOpen` is only touched while holding `condition`.
    private let condition = NSCondition()
    private var isOpen = false

    /// Creates a closed gate.
    package init() {}

    /// Opens the gate for good: releases every waiting thread and every later `wait()`.
    package func open() {
        condition.lock()
        isOpen = true
        condition.broadcast()
        condition.unlock()
    }

    /// Blocks the calling thread until the gate is open.
    package func wait() {
        condition.lock()
        while !isOpen { condition.wait() }
        condition.unlock()
    }
}
