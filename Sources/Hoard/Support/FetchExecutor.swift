import Dispatch

/// The task executor that runs fetches and the blocking and callback forms of `getOrFetch`.
///
/// A blocking `getOrFetch` waits on a semaphore for async work. If that work needed the cooperative
/// thread pool, two callers blocking pool threads would deadlock a 2-core machine; so the work runs
/// here, on threads the cooperative pool does not limit.
///
/// Each job goes to a serial dispatch queue of its own. Serial queues target the overcommitting
/// root queue, which starts a thread whenever the running ones are busy, so a job never waits behind
/// another one that blocks (a slow synchronous fetcher, say). Threads are reused between jobs.
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
final class FetchExecutor: TaskExecutor {
    static let shared = FetchExecutor()

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        DispatchQueue(label: "Hoard.FetchExecutor").async {
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

/// The queue that delivers `asyncGet`'s completions for memory hits.
///
/// One serial queue for every cache: a hit costs appending its completion to a list, no task and no
/// new queue, and completions that pile up while the queue is busy run in one go, with one dispatch.
/// A completion running on the queue that asks for another value and blocks until its own
/// completion runs would wait for itself, so a completion asked for from the queue goes to a queue
/// of its own.
@usableFromInline
enum CallbackQueue {
    private struct Pending {
        var completions: [@Sendable () -> Void] = []
        var isScheduled = false
    }

    private static let key = DispatchSpecificKey<Bool>()
    private static let pending = Locked(Pending())
    private static let queue: DispatchQueue = {
        let queue = DispatchQueue(label: "Hoard.asyncGet.hits")
        queue.setSpecific(key: key, value: true)
        return queue
    }()

    /// Runs `completion` on the shared queue, or on a queue of its own when called from it.
    @usableFromInline
    static func deliver(_ completion: @escaping @Sendable () -> Void) {
        if DispatchQueue.getSpecific(key: key) == true {
            DispatchQueue(label: "Hoard.asyncGet").async(execute: completion)
            return
        }
        let schedules = pending.withLock { pending in
            pending.completions.append(completion)
            defer { pending.isScheduled = true }
            return !pending.isScheduled
        }
        if schedules { queue.async(execute: drain) }
    }

    /// Runs the completions that have arrived, until none is left.
    private static func drain() {
        var batch: [@Sendable () -> Void] = []
        while true {
            pending.withLock { pending in
                swap(&batch, &pending.completions)
                if batch.isEmpty { pending.isScheduled = false }
            }
            if batch.isEmpty { return }
            for completion in batch { completion() }
            batch.removeAll(keepingCapacity: true)
        }
    }
}
