import Foundation

/// A one-shot gate: tasks that `wait()` are suspended until `open()`; cancelling a waiter ends its wait
/// with `CancellationError`.
final class Gate: @unchecked Sendable {
    // Safe because `isOpen` and `waiters` are only touched while holding `lock`.
    private let lock = NSLock()
    private var isOpen = false
    private var waiters: [UUID: CheckedContinuation<Void, any Error>] = [:]

    func open() {
        let toResume = lock.withLock {
            isOpen = true
            defer { waiters.removeAll() }
            return Array(waiters.values)
        }
        for waiter in toResume { waiter.resume() }
    }

    func wait() async throws {
        let id = UUID()
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let outcome: Result<Void, any Error>? = lock.withLock {
                    if isOpen { return .success(()) }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    waiters[id] = continuation
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            let waiter = lock.withLock { waiters.removeValue(forKey: id) }
            waiter?.resume(throwing: CancellationError())
        }
    }
}

/// Runs `body` on a new plain thread and returns its result, without blocking the cooperative pool.
func onPlainThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: body()) }
    }
}

/// Suspends until `condition` holds, checking it again and again; gives up after `seconds` so that a
/// broken test fails instead of hanging.
///
/// The first checks only yield, so a condition that holds soon is seen at once. After that each
/// check waits a millisecond first: a test that spins on a cooperative thread for long would take
/// that core from the threads it waits for (a local server's, the sanitizers' slowed ones), and
/// with every suite running at once on a small machine, spinning tests starve each other.
///
/// The limit is generous: it only guards against a hang, and a loaded machine running every suite
/// at once (with sanitizers) can take tens of seconds to schedule a few threads.
nonisolated(nonsending) func waitUntil(seconds: Int = 600, _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .seconds(seconds)
    var checks = 0
    while ContinuousClock.now < deadline {
        if condition() { return true }
        checks += 1
        if checks < 1_000 {
            await Task.yield()
        } else {
            try? await Task.sleep(for: .milliseconds(1))
        }
    }
    return condition()
}

/// Suspends until `store` has closed: its `deinit` (which saves the eviction order) has finished,
/// not only begun, as a `weak` reference turning `nil` would tell.
func waitUntilClosed(_ closing: DispatchGroup, seconds: Int = 600) async -> Bool {
    await onPlainThread { closing.wait(timeout: .now() + .seconds(seconds)) == .success }
}
