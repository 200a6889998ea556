import Dispatch

extension CacheLevel {
    /// Calls ``CacheLevel/onMemoryWarning()`` whenever the system runs short of memory, until the
    /// returned subscription is cancelled or released.
    ///
    /// - On Apple platforms, a dispatch memory-pressure source reports the system's `warning` and
    ///   `critical` events.
    /// - On Linux, the kernel's pressure-stall information (`/proc/pressure/memory`) is read every
    ///   5 seconds; the level is warned when `some avg10` (the share of the last 10 seconds in which
    ///   some task stalled waiting for memory) rises above 10 %, and warned again only after it has
    ///   fallen back to 10 % or less. Where the file does not exist or cannot be read (kernels before
    ///   4.20, kernels without `CONFIG_PSI` or booted with `psi=0`, some containers), nothing is ever
    ///   reported: the subscription's ``MemoryWarningSubscription/isActive`` is `false` and an
    ///   `info` message is logged.
    ///
    /// `onMemoryWarning()` is called on a dispatch queue of the system, never on the main thread.
    /// On a composition it reaches every level:
    /// ```swift
    /// let images = memory.compose(disk).compose(NetworkFetcher())
    /// let subscription = images.listenToMemoryWarnings()   // keep it as long as you want warnings
    /// ```
    ///
    /// - Returns: The subscription; warnings stop when it is cancelled or released.
    public func listenToMemoryWarnings() -> MemoryWarningSubscription {
        #if canImport(Darwin)
        let source = DispatchSource.makeMemoryPressureSource(
            eventMask: [.warning, .critical],
            queue: .global(qos: .utility)
        )
        source.setEventHandler { self.onMemoryWarning() }
        source.resume()
        return MemoryWarningSubscription(source: source)
        #else
        let poller = MemoryPressurePoller(read: MemoryPressurePoller.readKernelPressure) {
            self.onMemoryWarning()
        }
        return poller.start()
        #endif
    }
}

/// What ``CacheLevel/listenToMemoryWarnings()`` returns: keep it for as long as the level should
/// hear memory warnings.
///
/// Warnings stop when ``cancel()`` is called or the subscription is released; a warning already
/// being delivered may still arrive.
public final class MemoryWarningSubscription: Sendable {
    // Safe because a dispatch source is thread-safe (Dispatch does not mark it Sendable on Linux),
    // and the only call made on it, `cancel()`, may come from any thread.
    private let source: UnsafeLocked<(any DispatchSourceProtocol)?>

    init(source: (any DispatchSourceProtocol)?) {
        self.source = UnsafeLocked(source)
    }

    deinit {
        cancel()
    }

    /// Whether warnings can still arrive: `false` after ``cancel()``, and from the start where the
    /// platform offers no memory-pressure information.
    public var isActive: Bool {
        source.withLock { $0 != nil }
    }

    /// Stops the warnings; calling it again does nothing.
    public func cancel() {
        let source = source.withLock { source in
            defer { source = nil }
            return source
        }
        source?.cancel()
    }
}
