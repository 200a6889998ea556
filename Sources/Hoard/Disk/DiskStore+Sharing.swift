import Dispatch
import Foundation

extension DiskStore {
    /// The stores open in this process, by the real path of their folder.
    ///
    /// Its lock is held only to look up or change the table, never while a container is listed or
    /// its index rebuilt: an opening publishes a placeholder, opens the store without the lock, then
    /// publishes the store. Two containers open in parallel; a second opening of one container waits
    /// for the first and shares its store.
    private static let registry = Locked(Registry())

    /// Points of opening a container at which a test may hold the opening thread.
    static let testHooks = OpeningTestHooks()

    /// Returns the store already open on this container in this process, or opens one.
    ///
    /// Two stores on one folder would overwrite each other's index and miss each other's pending
    /// writes, so a process keeps one per folder, found by the folder's real path (symbolic links
    /// resolved once the folder exists). Opening one container does not wait for another one to open;
    /// a second caller for the same container waits until the first has opened it, then shares it.
    ///
    /// A store that no cache or level uses any more may still be finishing its queued writes: an
    /// opening with other settings (a new value type, a new version) waits for it to close (at most
    /// ``closingWait``), then opens the container afresh, so that releasing a cache leaves nothing a
    /// later opening trips over. One with the same settings shares it.
    ///
    /// - Throws: ``CacheError`` with code `invalidConfiguration` when a cache or level still uses the
    ///   container with another count limit, byte limit, eviction policy or schema version (one store
    ///   cannot keep two limits), with code `containerInUse` when another process has it open (see
    ///   ``ContainerLock``), or with code `io` when the container cannot be created.
    static func shared(at url: URL, options: Options) throws -> DiskStore {
        let path = try Directory.create(at: url)
        let options = options.normalized
        var hasWaitedForClosing = false
        while true {
            switch try next(at: path, options: options, mayWaitForClosing: !hasWaitedForClosing) {
            case .use(let store):
                return store
            case .waitForOpening(let done):
                testHooks.run(.waitingForAnotherOpening, at: path)
                // Then look again: the store is published, or the opening failed and this caller tries.
                done.wait()
            case .waitForClosing(let closed):
                // No cache or level uses the store any more: it is only finishing its queued work.
                // Once it has closed, the container opens afresh with the settings asked for.
                hasWaitedForClosing = true
                _ = closed.wait(timeout: .now() + Self.closingWait)
            case .open(let done):
                defer { done.leave() }
                var messages = DeferredLog()
                defer { messages.flush() }
                do {
                    let store = try DiskStore(
                        at: URL(fileURLWithPath: path, isDirectory: true),
                        options: options,
                        log: &messages
                    )
                    registry.withLock { $0.publish(store, at: path) }
                    return store
                } catch {
                    registry.withLock { $0.abandon(path) }
                    throw error
                }
            }
        }
    }

    /// How long an opening with other settings waits for a store that nobody uses any more to
    /// finish its queued writes and close.
    static let closingWait = DispatchTimeInterval.seconds(120)

    /// What ``shared(at:options:)`` does next.
    private enum Next {
        case use(DiskStore)
        case waitForOpening(DispatchGroup)
        /// Wait for the store open on the container, which nobody uses any more, to close.
        case waitForClosing(DispatchGroup)
        /// Open the store, then publish or abandon it, then leave the group.
        case open(DispatchGroup)
    }

    /// Claims the container at `path`; holds no store once it returns, except the one to use.
    private static func next(at path: String, options: Options, mayWaitForClosing: Bool) throws -> Next {
        let (claim, released) = registry.withLock { $0.claim(path) }
        // The last reference to a closed store may be here: its `deinit` saves its index, so it
        // runs now, outside the registry's lock.
        withExtendedLifetime(released) {}
        switch claim {
        case .open(let store):
            // Never on the store's own writer (a serializer opening its container anew): the store
            // could not close while its writer waits.
            if mayWaitForClosing && !store.isSameOpening(options) && !store.isInUse && !store.isRunningOnWriter {
                // A cache released a moment ago, whose writer still holds its store: another
                // opening with other settings (a new value type, a new version) waits for it.
                return .waitForClosing(store.closing.group)
            }
            try check(store, opens: path, with: options)
            return .use(store)
        case .opening(let done):
            return .waitForOpening(done)
        case .mine(let done):
            return .open(done)
        }
    }

    /// Whether an opening with `options` shares this store as it is.
    private func isSameOpening(_ options: Options) -> Bool {
        var options = options
        options.exclusiveProcess = self.options.exclusiveProcess
        return self.options == options
    }

    /// Whether a cache or a level still uses the store (rather than only its writer finishing).
    var isInUse: Bool {
        withState { state in state.levelUsers > 0 || state.observers.values.contains { $0.observer != nil } }
    }

    /// Counts a disk cache level that uses the store until ``removeLevelUser()``.
    func addLevelUser() {
        withState { $0.levelUsers += 1 }
    }

    /// Stops counting a disk cache level that used the store.
    func removeLevelUser() {
        withState { $0.levelUsers -= 1 }
    }

    private static func check(_ store: DiskStore, opens path: String, with options: Options) throws {
        // Exclusivity is the process's, decided by its first opening of the container.
        var options = options
        options.exclusiveProcess = store.options.exclusiveProcess
        guard store.options != options else { return }
        if let open = store.options.contents, let asked = options.contents, open != asked {
            throw CacheError.invalidConfiguration(
                ContainerManifest.mismatch(at: path, holds: open, opened: asked, version: store.options.schemaVersion)
            )
        }
        throw CacheError.invalidConfiguration(
            "The container \(path) is already open in this process with maxDiskCount "
                + "\(store.options.capacity), byte limit \(describe(store.options.byteLimit)), "
                + "evictionPolicy \(store.options.policy) and schema version "
                + "\(store.options.schemaVersion); open it with the same settings (asked: "
                + "\(options.capacity), \(describe(options.byteLimit)), \(options.policy), "
                + "\(options.schemaVersion))."
        )
    }

    private static func describe(_ byteLimit: Int?) -> String { byteLimit.map(String.init) ?? "none" }

    /// The table of open stores: a value whose changes say what the caller does next.
    private struct Registry: Sendable {
        private struct WeakStore: Sendable {
            weak var store: DiskStore?
        }

        private enum Slot: Sendable {
            /// Being opened by another caller; `done` is left once it is published or abandoned.
            case opening(done: DispatchGroup)
            case open(WeakStore)
        }

        /// What a caller of `shared(at:options:)` does next.
        enum Claim {
            /// Use this store.
            case open(DiskStore)
            /// Wait for `done`, then claim again.
            case opening(done: DispatchGroup)
            /// Open the store, then publish or abandon it, then leave `done`.
            case mine(done: DispatchGroup)
        }

        private var slots: [String: Slot] = [:]

        /// Finds the store of `path`, or the opening in progress, or makes the caller its opener.
        ///
        /// - Returns: The claim, and the stores still open that the caller must release after
        ///   unlocking (closed ones are dropped from the table).
        mutating func claim(_ path: String) -> (Claim, released: [DiskStore]) {
            var alive: [DiskStore] = []
            slots = slots.filter { _, slot in
                guard case .open(let weak) = slot else { return true }
                guard let store = weak.store else { return false }
                alive.append(store)
                return true
            }
            switch slots[path] {
            case .open(let weak)?:
                if let store = weak.store { return (.open(store), alive) }
            case .opening(let done)?:
                return (.opening(done: done), alive)
            case nil:
                break
            }
            let done = DispatchGroup()
            done.enter()
            slots[path] = .opening(done: done)
            return (.mine(done: done), alive)
        }

        /// Replaces the placeholder of `path` with its store.
        mutating func publish(_ store: DiskStore, at path: String) {
            slots[path] = .open(WeakStore(store: store))
        }

        /// Drops the placeholder of an opening that failed.
        mutating func abandon(_ path: String) {
            slots[path] = nil
        }
    }

    // MARK: - The caches sharing the store

    /// The caches registered on this store, except `origin`.
    func observers(except origin: (any DiskStoreObserver)?) -> [any DiskStoreObserver] {
        withState { $0.observers(except: origin) }
    }

    /// Registers a cache to hear of changes that other caches make to this container.
    ///
    /// - Returns: How many clears of the container (``beginClear(by:)``) are under way: the cache
    ///   joins them, and hears `diskStoreDidEndClear()` at the end of each, as if it had heard
    ///   `diskStoreWillClear()` at its start.
    @discardableResult
    func addObserver(_ observer: any DiskStoreObserver) -> Int {
        withState { state in
            state.observers[ObjectIdentifier(observer)] = WeakObserver(observer: observer)
            for id in state.clearsUnderWay.keys { state.clearsUnderWay[id]?.append(WeakObserver(observer: observer)) }
            return state.clearsUnderWay.count
        }
    }

    /// Begins a clear of every value by `origin` (`nil` for a `DiskCacheLevel`), in several steps.
    ///
    /// - Returns: The clear, for ``endClear(_:)``, and the other caches on the store, to tell
    ///   `diskStoreWillClear()` now; a cache registered before the end joins it (see
    ///   ``addObserver(_:)``).
    func beginClear(by origin: (any DiskStoreObserver)?) -> (clear: UInt64, peers: [any DiskStoreObserver]) {
        withState { state in
            state.lastClear &+= 1
            let peers = state.observers(except: origin)
            state.clearsUnderWay[state.lastClear] = peers.map { WeakObserver(observer: $0) }
            return (state.lastClear, peers)
        }
    }

    /// Ends a clear begun with ``beginClear(by:)``.
    ///
    /// - Returns: The caches to tell `diskStoreDidEndClear()`: those told it began, and those
    ///   registered since.
    func endClear(_ clear: UInt64) -> [any DiskStoreObserver] {
        withState { state in (state.clearsUnderWay.removeValue(forKey: clear) ?? []).compactMap(\.observer) }
    }

    /// Stops telling a cache of changes.
    func removeObserver(_ observer: any DiskStoreObserver) {
        withState { $0.observers[ObjectIdentifier(observer)] = nil }
    }
}

/// Code a test runs at chosen points of opening a container, to hold one opening while another
/// goes on; none is installed outside tests.
final class OpeningTestHooks: Sendable {
    /// A point of opening a container.
    enum Event: Sendable {
        /// While reading the entry files that the saved index does not name: halfway through them,
        /// or, with no index file, once the listing is done (reads may be under way on other threads).
        case rebuilding
        /// Before waiting for another caller that is opening the same container.
        case waitingForAnotherOpening
        /// On the writer, before the index loads in the background (after the opening returned).
        case loadingInBackground
        /// On the writer, once the index loaded in the background, before the caches hear of the
        /// marks of other processes' shared changes it learned of.
        case loadedBeforeTelling
    }

    private let hooks = Locked<[String: @Sendable (Event) -> Void]>([:])

    /// Installs `hook` for the container at the real path `path`, or removes it when `nil`.
    func set(_ hook: (@Sendable (Event) -> Void)?, at path: String) {
        hooks.withLock { $0[path] = hook }
    }

    /// Runs the hook installed for `path`, if any, holding no lock.
    func run(_ event: Event, at path: String) {
        hooks.withLock { $0[path] }?(event)
    }
}
