import Dispatch

/// Starts the unstructured tasks that run fetches.
enum FetchTask {
    /// Starts `operation` on ``FetchExecutor`` where the platform supports task executors, and on the
    /// global executor elsewhere (before macOS 15 / iOS 18, where a blocking `getOrFetch` called from
    /// the cooperative pool can then starve its own fetch).
    @discardableResult
    static func run<Success: Sendable>(
        _ operation: @escaping @Sendable () async throws -> Success
    ) -> Task<Success, any Error> {
        // A task started from an eviction callback must not inherit that callback's flag.
        let detached: @Sendable () async throws -> Success = {
            try await EvictionCallback.$isRunning.withValue(false) { try await operation() }
        }
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
            return Task(executorPreference: FetchExecutor.shared, operation: detached)
        } else {
            return Task(operation: detached)
        }
    }

    /// Runs `operation` on Hoard's executor and blocks the calling thread until it has finished.
    ///
    /// For the blocking forms (`getOrFetchAndWait`, `flushAndWait`): the work never needs a thread
    /// of the cooperative pool, so blocked callers cannot starve it.
    ///
    /// - Returns: What the operation returned or threw.
    static func runAndWait<Success: Sendable>(
        _ operation: @escaping @Sendable () async throws -> Success
    ) -> Result<Success, any Error> {
        let outcome = Locked<Result<Success, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        // Unstructured on purpose: a synchronous caller has no task; this thread waits for it.
        run {
            let result: Result<Success, any Error>
            do {
                result = .success(try await operation())
            } catch {
                result = .failure(error)
            }
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        return outcome.withLock { $0 } ?? .failure(CancellationError())
    }
}
