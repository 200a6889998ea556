import Dispatch

/// The task executor that runs fetches and the blocking and callback forms of `getOrFetch`.
///
/// A blocking `getOrFetch` waits on a semaphore for async work. If that work needed the cooperative
/// thread pool, two callers blocking pool threads would deadlock a 2-core machine; so the work runs
/// here, on Hoard's own threads, which are never blocked by callers.
///
/// Jobs go round-robin to a few serial dispatch queues (serial queues get threads of their own,
/// outside the width-limited pool).
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
final class FetchExecutor: TaskExecutor {
    static let shared = FetchExecutor(width: 4)

    private let queues: [DispatchQueue]
    private let next = Locked(0)

    private init(width: Int) {
        queues = (0..<width).map { DispatchQueue(label: "Hoard.FetchExecutor.\($0)") }
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let index = next.withLock { index in
            index = (index + 1) % queues.count
            return index
        }
        queues[index].async {
            job.runSynchronously(on: self.asUnownedTaskExecutor())
        }
    }
}

/// Starts the unstructured tasks that run fetches.
enum FetchTask {
    /// Starts `operation` on ``FetchExecutor`` where the platform supports task executors, and on the
    /// global executor elsewhere (before macOS 15 / iOS 18, where a blocking `getOrFetch` called from
    /// the cooperative pool can then starve its own fetch).
    @discardableResult
    static func run<Success: Sendable>(
        _ operation: @escaping @Sendable () async throws -> Success
    ) -> Task<Success, any Error> {
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
            return Task(executorPreference: FetchExecutor.shared, operation: operation)
        } else {
            return Task(operation: operation)
        }
    }
}
