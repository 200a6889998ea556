import Dispatch

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The queue that delivers `asyncGet`'s completions for memory hits.
///
/// One serial queue for every cache: a hit costs appending its completion to a list, no task and no
/// new queue, and completions that pile up while the queue is busy run in one go, with one dispatch.
/// A completion running on the queue that asks for another value and blocks until its own
/// completion runs would wait for itself, so a completion asked for from the queue goes to a queue
/// of its own.
///
/// Once the list is empty, the queue's thread stays awake for ``linger``, yielding its core to any
/// other thread that is ready, before it returns to the pool. A caller that awaits each completion
/// before asking again then finds the thread awake: its hit appends to the list and returns, where
/// waking the queue's thread cost the caller a system call (about 1 µs on a 2-core Linux host) and
/// the completion a wake-up (2.5–3.5 µs). The hand-over back to the caller is the caller's own;
/// the Performance article breaks a call down.
@usableFromInline
enum CallbackQueue {
    private struct Pending {
        var completions: [@Sendable () -> Void] = []
        var isScheduled = false
    }

    /// How long the queue's thread waits for more completions once it has run them all.
    ///
    /// Long enough to cover the way back to a caller that awaits each completion and asks again (a
    /// thread wake-up, a few µs, tens on a busy host); short enough that a lone hit costs next to
    /// nothing: at most this much of one core, yielded to any other thread that is ready.
    static let linger = Duration.microseconds(50)

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
        if isCurrent {
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

    /// Whether the calling code runs on the shared queue.
    static var isCurrent: Bool { DispatchQueue.getSpecific(key: key) == true }

    /// Whether the queue's thread has returned to the pool: the next hit schedules it again.
    static var isIdle: Bool { pending.withLock { !$0.isScheduled } }

    /// Runs the completions that arrive, until none has arrived for ``linger``.
    private static func drain() {
        let clock = ContinuousClock()
        var batch: [@Sendable () -> Void] = []
        var idleSince: ContinuousClock.Instant?
        while true {
            let hasLingered = idleSince.map { $0.duration(to: clock.now) >= linger } ?? false
            let isDone = pending.withLock { pending in
                swap(&batch, &pending.completions)
                guard batch.isEmpty && hasLingered else { return false }
                // Whoever appends next sees this and schedules a new drain.
                pending.isScheduled = false
                return true
            }
            if isDone { return }
            if batch.isEmpty {
                if idleSince == nil { idleSince = clock.now }
                // Another thread that is ready (the caller about to ask again, say) gets the core.
                sched_yield()
                continue
            }
            idleSince = nil
            for completion in batch { completion() }
            batch.removeAll(keepingCapacity: true)
        }
    }
}
