import Foundation

/// A value shared with Hoard's threads, read and changed under a lock.
final class Locked<State: Sendable>: @unchecked Sendable {
    // Safe because `state` is only read or written while holding `lock`.
    private let lock = NSLock()
    private var state: State

    init(_ state: State) { self.state = state }

    func withLock<Result>(_ body: (inout State) -> Result) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return body(&state)
    }
}
