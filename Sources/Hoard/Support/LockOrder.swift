#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The locks inside Hoard, and the only ways they may nest.
///
/// Every lock is a ``Lock`` (alone or inside a ``Locked``) or one lock of a ``LockArray``. None is
/// ever held while calling user code (a serializer, a fetcher, a delegate, a transformer, the
/// logger's output) or while doing file I/O that other keys would wait on; code mutates under the
/// lock, returns what must happen, and does it after unlocking.
///
/// | family | guards | may take, while held |
/// |---|---|---|
/// | key stripes (`KeyStripes`, 16 per cache) | a change to one key across memory, disk and the shared level | a memory shard; the disk store's state lock; the shared level's state lock |
/// | all key stripes (`KeyStripes.changeAll`) | a clear | the same, taking stripes in index order |
/// | reporter state (`CacheReporter.state`) | counters, the delegate, who listens | the event hub's lock; memory shards, one at a time |
/// | disk store I/O (`DiskStore` `ioLock`) | changes to files: the writer's rename, clears, repairs | a container's section; the disk store's state lock; the folder's opening |
/// | a container's section (`ContainerLock`, one per container in a process, then `fcntl(F_SETLKW)` on byte 1 of `.hoard-lock`) | changes to the container's files by any thread of any process, and its journal | the disk store's state lock; the folder's opening; the container-lock table |
/// | disk store state (`DiskStore` state lock) | the index, the pending writes, the queue | nothing |
/// | shared level state (`SharedLevel.state`) | the shared level's pending writes, in key order | nothing (the writes run on their own tasks, after unlocking) |
/// | memory shard (`MemoryStore.locks`) | one shard's index and counters | the store's room lock |
/// | memory room (`MemoryStore.roomLock`, the last of `locks`) | the spare room a sharded store shares | nothing |
/// | the registry of open disk stores (`DiskStore` registry) | which containers are open or opening | nothing (no I/O: an opening is published, then done outside) |
/// | a folder's opening (`Directory`) | the folder's descriptor | the container-lock table, when a deleted folder is opened again |
/// | the container-lock table (`ContainerLock`) | this process's container locks | nothing (an `openat` and an `fcntl`) |
/// | HoardRedis's tracking hubs (`TrackingHub.hubs`) | which tracking connections are open | one hub's state lock (a `Locked`); making a hub's connection (a pipe, a thread) |
/// | HoardRedis's Sentinel watches (`SentinelWatch.watches`) | which Sentinel watches are open, and how many levels share each | making a watch's connections (a pipe, a thread) |
/// | event hub, fetches in flight, logger output, retry count, and every other `Locked` | their own state | nothing |
///
/// A lock further down the table is never held while taking one further up. Locks of one family
/// never nest, except all stripes taken together in index order.
///
/// In debug builds each thread counts the Hoard locks it holds, and every call into user code
/// asserts that it holds none (see ``assertNoneHeld(_:)``), so a test that reaches user code under
/// a lock fails at once instead of deadlocking one run in a thousand. The disk store also checks
/// its own two locks' order (`DiskLockOrder`): never its state lock under a state lock, never its
/// I/O lock under either.
@usableFromInline
enum LockOrder {
    #if DEBUG
    /// The number of Hoard locks the current thread holds.
    private static let heldKey: pthread_key_t = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key, nil)
        assert(status == 0, "pthread_key_create failed: \(status)")
        return key
    }()

    @usableFromInline
    static var heldByThisThread: Int {
        get { Int(bitPattern: pthread_getspecific(heldKey)) }
        set { _ = pthread_setspecific(heldKey, UnsafeRawPointer(bitPattern: newValue)) }
    }
    #endif

    /// Counts a lock the current thread took (debug builds only).
    @inlinable
    static func didLock() {
        #if DEBUG
        heldByThisThread += 1
        #endif
    }

    /// Counts a lock the current thread released (debug builds only).
    @inlinable
    static func willUnlock() {
        #if DEBUG
        heldByThisThread -= 1
        #endif
    }

    /// Traps, in debug builds, when the current thread holds a Hoard lock: call it right before
    /// calling user code.
    ///
    /// - Parameter call: What is about to be called, for the message.
    @inlinable
    static func assertNoneHeld(_ call: @autoclosure () -> String) {
        #if DEBUG
        precondition(heldByThisThread == 0, "Hoard holds a lock while \(call())")
        #endif
    }
}
