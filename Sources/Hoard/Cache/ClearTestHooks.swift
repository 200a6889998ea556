/// Code a test runs between the steps of a cache's `removeAll()` (or of a `DiskCacheLevel`'s
/// `clear()`, or of a coherent cache's drop of its local copies), to land a fetch or a read in the
/// middle of the clear; none is installed outside tests.
final class ClearTestHooks: Sendable {
    /// A point between the steps of `removeAll()`.
    enum Event: Sendable {
        /// Memory and disk are cleared (the shared level's clear was asked for before them); memory
        /// is not emptied a second time yet (for a `DiskCacheLevel`: the files are removed; the
        /// caches on the container are not told yet).
        case clearedDisk
        /// The shared level's clear is asked for; memory and disk are not cleared yet.
        case clearedShared
        /// A coherent cache dropping its local copies (a loss of tracking, or `build()`) cleared its
        /// disk, on the drop's own thread; the disk level does not serve again yet.
        case droppedLocalDisk
        /// A disk store caught up with another process's clear (a journaled `clear`); its caches
        /// are not told yet. Run for the store, on the thread that caught up.
        case caughtUpWithPeerClear
        /// A disk store caught up with other processes' changes of keys (no clear); its caches are
        /// not told yet. Run for the store, on the thread that caught up.
        case caughtUpWithPeerChanges
    }

    /// The hooks, by the cache (an `ObjectIdentifier`) they are installed for.
    static let installed = ClearTestHooks()

    private let hooks = Locked<[ObjectIdentifier: @Sendable (Event) -> Void]>([:])

    /// Installs `hook` for `cache`, or removes it when `nil`; a test removes what it installed
    /// before it releases the cache.
    func set(_ hook: (@Sendable (Event) -> Void)?, for cache: AnyObject) {
        hooks.withLock { $0[ObjectIdentifier(cache)] = hook }
    }

    /// Runs the hook installed for `cache`, if any, holding no lock.
    func run(_ event: Event, for cache: AnyObject) {
        hooks.withLock { $0.isEmpty ? nil : $0[ObjectIdentifier(cache)] }?(event)
    }
}
