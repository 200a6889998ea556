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
    }

    /// Releases the lock; only the thread that acquired it may call this.
    @inlinable
    func unlock() {
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

/// The primitive of a ``Lock``, usable without touching the lock object.
///
/// A hot path that locks through the object pays a retain and a release of it on each call; one that
/// keeps this handle next to the `Lock` (which owns the primitive and must outlive every use) pays
/// neither.
@usableFromInline
struct LockHandle: @unchecked Sendable {
    // Safe because it is only a pointer to a primitive made to be shared between threads, owned by
    // a `Lock` that outlives the handle.
    #if canImport(Darwin)
    @usableFromInline let primitive: UnsafeMutablePointer<os_unfair_lock>
    #else
    @usableFromInline let primitive: UnsafeMutablePointer<pthread_mutex_t>
    #endif

    /// A handle to the primitive of `lock`.
    @usableFromInline
    init(_ lock: Lock) { primitive = lock.primitive }

    /// Acquires the lock.
    @inlinable
    func lock() {
        #if canImport(Darwin)
        os_unfair_lock_lock(primitive)
        #else
        pthread_mutex_lock(primitive)
        #endif
    }

    /// Releases the lock.
    @inlinable
    func unlock() {
        #if canImport(Darwin)
        os_unfair_lock_unlock(primitive)
        #else
        pthread_mutex_unlock(primitive)
        #endif
    }
}

/// A value that is only ever read or written while holding a lock.
@usableFromInline
final class Locked<State>: @unchecked Sendable {
    // Safe because `state` is only reached through `withLock`, which holds `lock`.
    @usableFromInline let lock = Lock()
    @usableFromInline var state: State

    /// Wraps an initial state.
    @usableFromInline
    init(_ state: State) {
        self.state = state
    }

    /// Runs `body` with exclusive access to the state.
    @inlinable
    func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&state)
    }
}
