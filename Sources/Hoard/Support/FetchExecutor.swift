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
