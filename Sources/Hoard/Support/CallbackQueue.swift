import Dispatch

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
