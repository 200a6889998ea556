#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A small mutual-exclusion lock: `os_unfair_lock` on Apple platforms, `pthread_mutex_t` elsewhere.
///
/// `Synchronization.Mutex` would need macOS 15 / iOS 18 and makes ThreadSanitizer report false races on
/// Linux; this lock has neither problem. The lock lives in its own heap allocation, so its address never
/// moves, which both primitives require.
@usableFromInline
final class Lock: @unchecked Sendable {
    // Safe because the only stored state is the primitive itself, which is designed to be shared
    // between threads; its address is stable for the object's lifetime.
    #if canImport(Darwin)
    @usableFromInline let primitive: UnsafeMutablePointer<os_unfair_lock>
    #else
    @usableFromInline let primitive: UnsafeMutablePointer<pthread_mutex_t>
    #endif

    /// Creates an unlocked lock.
    @usableFromInline
    init() {
        primitive = .allocate(capacity: 1)
        #if canImport(Darwin)
        primitive.initialize(to: os_unfair_lock())
        #else
        primitive.initialize(to: pthread_mutex_t())
        let status = pthread_mutex_init(primitive, nil)
        assert(status == 0, "pthread_mutex_init failed: \(status)")
        #endif
    }

    deinit {
        #if !canImport(Darwin)
        pthread_mutex_destroy(primitive)
        #endif
        primitive.deinitialize(count: 1)
        primitive.deallocate()
    }

    /// Acquires the lock, waiting for it if another thread holds it.
    @inlinable
    func lock() {
        #if canImport(Darwin)
        os_unfair_lock_lock(primitive)
        #else
        pthread_mutex_lock(primitive)
        #endif
        LockOrder.didLock()
    }

    /// Releases the lock; only the thread that acquired it may call this.
    @inlinable
    func unlock() {
        LockOrder.willUnlock()
        #if canImport(Darwin)
        os_unfair_lock_unlock(primitive)
        #else
        pthread_mutex_unlock(primitive)
        #endif
    }

    /// Runs `body` while holding the lock and returns its result.
    ///
    /// - Important: `body` must not call user code (serializers, fetchers, delegates) or do file I/O
    ///   that other keys would wait on. Compute what must happen inside, do it after unlocking.
    @inlinable
    func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        lock()
        defer { unlock() }
        return try body()
    }
}

/// A fixed number of locks, each with a counter it guards, on memory lines of their own.
///
/// Threads taking different locks never slow each other down.
///
/// The array owns the primitives: it must outlive every use, and it is not copyable.
@usableFromInline
struct LockArray: ~Copyable, @unchecked Sendable {
    // Safe because the primitives are made to be shared between threads and never move.
    #if canImport(Darwin)
    @usableFromInline typealias Primitive = os_unfair_lock
    #else
    @usableFromInline typealias Primitive = pthread_mutex_t
    #endif
    /// Bytes between two locks: two cache lines, past any adjacent-line prefetching.
    @usableFromInline static var stride: Int { 128 }
    /// Where a lock's counter sits in its slot, after the primitive.
    @usableFromInline static var counterOffset: Int { 64 }

    @usableFromInline let base: UnsafeMutableRawPointer
    @usableFromInline let count: Int

    /// Creates `count` unlocked locks.
    init(count: Int) {
        self.count = count
        base = .allocate(byteCount: count * Self.stride, alignment: Self.stride)
        for index in 0..<count {
            let primitive = (base + index * Self.stride).bindMemory(to: Primitive.self, capacity: 1)
            #if canImport(Darwin)
            primitive.initialize(to: os_unfair_lock())
            #else
            primitive.initialize(to: pthread_mutex_t())
            #if canImport(Glibc)
            // Adaptive: a thread that finds the lock taken spins briefly before sleeping in the
            // kernel. These locks are held for a few hundred nanoseconds, far less than a sleep and
            // a wake-up cost, so two threads on different cores meet without a context switch.
            var attributes = pthread_mutexattr_t()
            pthread_mutexattr_init(&attributes)
            pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
            let status = pthread_mutex_init(primitive, &attributes)
            pthread_mutexattr_destroy(&attributes)
            #else
            let status = pthread_mutex_init(primitive, nil)
            #endif
            assert(status == 0, "pthread_mutex_init failed: \(status)")
            #endif
            (base + index * Self.stride + Self.counterOffset).bindMemory(to: UInt64.self, capacity: 1).initialize(to: 0)
        }
    }

    deinit {
        for index in 0..<count {
            let primitive = self.primitive(index)
            #if !canImport(Darwin)
            pthread_mutex_destroy(primitive)
            #endif
            primitive.deinitialize(count: 1)
        }
        base.deallocate()
    }

    @inlinable
    func primitive(_ index: Int) -> UnsafeMutablePointer<Primitive> {
        (base + index &* Self.stride).assumingMemoryBound(to: Primitive.self)
    }

    /// The counter that lock number `index` guards: read or write it only while holding that lock.
    @inlinable
    func counter(_ index: Int) -> UnsafeMutablePointer<UInt64> {
        (base + index &* Self.stride + Self.counterOffset).assumingMemoryBound(to: UInt64.self)
    }

    /// Acquires lock number `index`.
    @inlinable
    func lock(_ index: Int) {
        #if canImport(Darwin)
        os_unfair_lock_lock(primitive(index))
        #else
        pthread_mutex_lock(primitive(index))
        #endif
        LockOrder.didLock()
    }

    /// Releases lock number `index`.
    @inlinable
    func unlock(_ index: Int) {
        LockOrder.willUnlock()
        #if canImport(Darwin)
        os_unfair_lock_unlock(primitive(index))
        #else
        pthread_mutex_unlock(primitive(index))
        #endif
    }

    /// Runs `body` holding lock number `index`.
    @inlinable
    func withLock<Result>(_ index: Int, _ body: () throws -> Result) rethrows -> Result {
        lock(index)
        defer { unlock(index) }
        return try body()
    }
}

/// A value that is only ever read or written while holding a lock.
///
/// Sendable only when its state is: the lock serializes access, but a non-Sendable value handed out
/// by `withLock` could still be shared by two threads. For the few states that hold non-Sendable
/// values, see ``UnsafeLocked``.
///
/// `package`, so that HoardRedis shares it and the debug check that no user code runs under a
/// Hoard lock (``LockOrder``).
@usableFromInline
package final class Locked<State> {
    @usableFromInline let lock = Lock()
    @usableFromInline var state: State

    /// Wraps an initial state.
    @usableFromInline
    package init(_ state: State) {
        self.state = state
    }

    /// Runs `body` with exclusive access to the state.
    @inlinable
    package func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&state)
    }
}

// Safe because `state` is only reached through `withLock`, which holds `lock`, and the state itself
// may cross threads.
extension Locked: @unchecked Sendable where State: Sendable {}

/// A ``Locked`` whose state is not `Sendable`, shared between threads all the same.
///
/// Every use must say, next to its declaration, why the state it holds is safe to share: for
/// example, that no non-Sendable value ever leaves `withLock`, or that the values it holds are
/// thread-safe without saying so.
@usableFromInline
final class UnsafeLocked<State>: @unchecked Sendable {
    // Safe because the state is only reached through `withLock`; each use states why what it hands
    // out of the lock may cross threads.
    @usableFromInline let locked: Locked<State>

    /// Wraps an initial state.
    @usableFromInline
    init(_ state: State) {
        locked = Locked(state)
    }

    /// Runs `body` with exclusive access to the state.
    @inlinable
    func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        try locked.withLock(body)
    }
}
