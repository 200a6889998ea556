import Dispatch
import Foundation

/// Told by a disk store what became of the writes a cache enqueued, and of changes made by others.
///
/// Every method is called outside the store's locks, from the store's background writer or from the
/// thread of the cache that made the change.
@usableFromInline
protocol DiskStoreObserver: AnyObject, Sendable {
    /// The store is about to remove `key` to stay within its count or byte limit (or did not keep a
    /// value for `key` larger than the whole byte limit, or removed it because it expired).
    func diskStore(willEvictKey key: String, reason: EvictionReason)
    /// A value the observer set could not be written; it is not on disk.
    func diskStore(didFailToStoreKey key: String, error: CacheError)
    /// Another cache on the same container set or removed `key`.
    func diskStoreDidChange(key: String)
    /// Another cache on the same container removed every value.
    func diskStoreDidClear()
    /// Another cache (or a `DiskCacheLevel`) on the same container is about to remove every value, in
    /// several steps: until ``diskStoreDidEndClear()``, the observer keeps no value it fetched or read
    /// from the shared level. An observer registered during the clear hears only its end (see
    /// `DiskStore.addObserver(_:)`).
    func diskStoreWillClear()
    /// The clear announced by ``diskStoreWillClear()`` is done: as ``diskStoreDidClear()``.
    func diskStoreDidEndClear()
    /// Returns once the observer's own changes of `key` queued for its shared level when called
    /// (a removal, a set, a clear) have been made or have failed; at once when it has none.
    func waitForSharedChanges(of key: String) async
}

/// A value waiting for the background writer, readable until it lands.
@usableFromInline
struct PendingValue: Sendable {
    /// The value as it was set; a reader of the same type takes it as it is.
    @usableFromInline let value: any Sendable
    /// Encodes the value with the serializer of the cache that set it.
    @usableFromInline let serialize: @Sendable () throws -> Data
    /// When the value stops being live.
    @usableFromInline let expiresAt: Expiry
    /// Whether the value is a fill (read from the shared level, or fetched): when another process
    /// changed the key before it landed, it is not written, and the key's file is removed (see
    /// `DiskStore.State.isOutdatedFill(_:)`).
    @usableFromInline var isFill = false
    /// Whether the value is on its way to the shared level too: when the disk refuses it, the file
    /// of the older value goes with a mark that the shared level may still hold that value (see
    /// ``DiskStore/noteSharedChangePending(of:)``).
    @usableFromInline var isBoundForShared = false
}

/// A group entered while its owner lives and left once the owner is gone: the owner's `deinit` has
/// finished when a waiter on ``group`` wakes, whether or not the owner's initializer completed.
final class ClosingSignal: Sendable {
    let group = DispatchGroup()

    init() { group.enter() }

    deinit { group.leave() }
}

/// What the disk level holds for a key.
@usableFromInline
enum DiskLookup {
    /// A set whose write has not landed yet.
    case pending(PendingValue)
    /// An intact entry file.
    case stored(EntryFormat.Entry)
    /// Nothing (or a removal that has not landed yet).
    case miss
}

/// A thread-safe, file-backed store of serialized entries in one container folder.
///
/// The engine under both ``Cache`` and the disk cache level. Reads are synchronous and run on the
/// caller's thread; writes and removals are queued and applied in order by one background writer,
/// and until one lands, readers see it in the pending table. Caches in one process that open the same
/// container share one store (see ``shared(at:options:)``).
///
/// The in-memory state is a value, ``State``, kept in a ``Locked``: its mutating methods return what
/// must happen next (start the writer, tell these peers, apply this operation), and the store does it
/// once the lock is released. Its files are this store's concern:
/// - `DiskStore+State.swift`: the state and the actions its changes return;
/// - `DiskStore+Reading.swift`: lookups, and the repair of damaged or expired files;
/// - `DiskStore+Writer.swift`: the queue and the background writer;
/// - `DiskStore+Index.swift`: saving and loading the eviction order;
/// - `DiskStore+Sharing.swift`: one store per container in a process, and the caches that share it;
/// - `DiskStore+Invariants.swift`: the checks for tests, and the lock-order check of debug builds;
/// - `DiskStore+Container.swift`: the sections in which files change, run through the shared
///   container (``SharedContainer``: the container lock, the journal other processes read, the
///   manifest), and what the store does with what the other processes changed.
///
/// Two locks: the state lock guards ``State`` and is never held across I/O, user code or another
/// lock; `ioLock` is held by whoever changes files (the writer, one operation at a time, the clears
/// and the repairs), so that no write lands after a clear that followed it. Under `ioLock`, every
/// change runs in the container's section (see ``ContainerLock``): it first applies what other
/// processes (and other stores of this one) journaled, then journals each change before making it.
/// The only nesting is the section inside `ioLock` and the state lock inside both. No serializer
/// and no observer runs under either lock, and readers never take `ioLock` except to repair a file.
///
/// The index loads on the writer's queue, ahead of every queued operation (see `finishOpening()`):
/// opening returns at once, reads never wait for the load, and the accessors that need the whole
/// index (``count``, ``allKeys(isLive:)``, ``contains(_:isLive:)``) wait for it. When the lock file
/// says a process died in the middle of a section, the index loads before the opening returns.
///
/// Several processes may share the container. This store's index holds every process's entries as
/// of its last section (its last write, flush or repair): ``count``, ``allKeys(isLive:)`` and the
/// limits see other processes' changes from then on. A read of a key the index does not hold still
/// tries the key's file, so a value another process wrote is found at once.
@usableFromInline
final class DiskStore: Sendable {
    /// What a store is opened with.
    struct Options: Equatable, Sendable {
        /// The most entry files kept; at least 1.
        var capacity: Int
        /// Which entry to remove when a new one needs room.
        var policy: EvictionPolicy
        /// Entries written under another schema version are misses and are removed.
        var schemaVersion: UInt32 = 0
        /// The most bytes the entry files take together, or `nil` for no limit.
        ///
        /// An entry larger than the whole limit is not kept.
        var byteLimit: Int? = nil
        /// Whether the byte limit bounds every file of the container (a ``Cache``'s `maxDiskBytes`)
        /// rather than the entry files alone (a ``DiskCacheLevel``'s `byteLimit`).
        var limitsOwnFiles = false
        /// What the store's values are, checked against the container's manifest; `nil` for a store
        /// that does not care (tests of the store itself).
        var contents: ContainerContents? = nil
        /// A folder to remove, with everything in it, when the store closes: a temporary container's.
        var removedWhenClosed: URL? = nil
        /// The data-protection class of the container (Apple's mobile platforms); `nil` for the default.
        ///
        /// The raw value of a `FileProtectionType`, which is not `Equatable` on every platform.
        var fileProtection: String? = nil
        /// Whether this process keeps every other process out of the container while it is open
        /// (see ``ContainerLock``).
        var exclusiveProcess = false

        /// The options as a store applies them: a capacity of at least 1, a byte limit of at least 0.
        var normalized: Options {
            var options = self
            options.capacity = max(1, capacity)
            options.byteLimit = byteLimit.map { max(0, $0) }
            // Without a byte limit, a cache and a disk level on one container share its store.
            options.limitsOwnFiles = limitsOwnFiles && byteLimit != nil
            return options
        }
    }

    /// How many changes (writes, removals, hits) the writer lets pass before saving the index when idle.
    static let changesBetweenIndexSaves = 1_000

    let directory: Directory
    /// The container's lock, journal and manifest, which other processes share.
    let container: SharedContainer
    let options: Options
    /// The in-memory state; reach it only through ``withState(_:)``, which checks the lock order.
    let lockedState: Locked<State>
    /// Held while changing files; take it only through ``withIOLock(_:)``.
    let ioLock = Lock()
    let writer: DispatchQueue
    /// Entered once the opening has scheduled the load, left once the index has loaded (or by
    /// `deinit`, when it never did).
    let loaded = DispatchGroup()
    /// Left once the store has closed (its `deinit` has saved the index), for an opening that
    /// waits for it (see ``shared(at:options:)``).
    let closing = ClosingSignal()

    /// Opens the container at `url`, creating it (mode 0700) if needed, and loads its entries.
    ///
    /// - Throws: ``CacheError`` with code `containerInUse` when another process has it open
    ///   exclusively (or, with `exclusiveProcess`, at all), or with code `io` when the container
    ///   cannot be created.
    convenience init(at url: URL, options: Options) throws {
        var messages = DeferredLog()
        try self.init(at: url, options: options, log: &messages)
        messages.flush()
    }

    /// Opens the container, keeping what it reports in `log` so that the caller can send it once
    /// it has released its locks.
    ///
    /// - Complexity: O(n) in the index file, and one listing that copies only temporary files' names;
    ///   with no intact index, one listing and one read per entry file.
    init(at url: URL, options: Options, log: inout DeferredLog) throws {
        let options = options.normalized
        self.options = options
        directory = try Directory(creatingAt: url, exclusive: options.exclusiveProcess, log: &log)
        if let protection = options.fileProtection {
            do {
                try FileProtectionType(rawValue: protection).protect(folderAt: directory.path)
            } catch {
                throw CacheError.io(
                    "Cannot set the file protection of the container \(directory.path).",
                    underlying: error
                )
            }
        }
        container = SharedContainer(directory: directory, policy: options.policy, capacity: options.capacity)
        writer = DispatchQueue(label: "Hoard.DiskStore.writer")
        lockedState = Locked(State(options: options))
        writer.setSpecific(key: Self.writerKey, value: ObjectIdentifier(self))
        try container.checkManifest(options.contents, version: options.schemaVersion, log: &log)
        let fixedFileBytes = container.fixedFileBytes
        withState { $0.fixedFileBytes = fixedFileBytes }
        // An unsearchable folder fails the opening now, as it did when the index loaded here.
        if case .failure(let error) = directory.identity(of: ContainerFile.index) {
            throw CacheError.io("Cannot list the container \(directory.path).", underlying: error)
        }
        // A process killed in the middle of a section may have left temporary files, an entry over
        // the limits, or a short index: load now, so that build() returns with the container
        // settled, as a caller that lists its files right after expects.
        if container.writerInSection != nil {
            // No cache is registered yet: none has a fill to keep off the disk.
            var news = PeerNews()
            defer { didTell(news) }
            try openIndex(log: &log, news: &news)
            withState { state in
                state.isLoaded = true
                state.newMarkNews = PeerNews()
            }
            return
        }
        // Nothing throws from here on: `deinit` balances the group if the load never runs.
        loaded.enter()
        withState { $0.isLoading = true }
        // Weakly: a store released before its index loaded needs no index (its `deinit` leaves `loaded`).
        writer.async { [weak self] in self?.finishOpening() }
    }

    /// Names the store whose writer's queue runs the current code.
    private static let writerKey = DispatchSpecificKey<ObjectIdentifier>()

    /// Whether the calling code runs on this store's background writer (a serializer of a
    /// background write, a disk-eviction or failed-write callback): it must not wait for the writer.
    var isRunningOnWriter: Bool { DispatchQueue.getSpecific(key: Self.writerKey) == ObjectIdentifier(self) }

    /// Loads the index on the writer's queue, before any write: ``build()`` returns at once.
    private func finishOpening() {
        Self.testHooks.run(.loadingInBackground, at: directory.path)
        var messages = DeferredLog()
        var accessesStartWriter = false
        var news = PeerNews()
        do {
            accessesStartWriter = try openIndex(log: &messages, news: &news)
        } catch {
            messages.add(.error, "Cannot load the index of \(directory.path): \(error)")
        }
        // Logged before anyone waiting hears the index is loaded: what the load found is told first.
        messages.flush()
        // The marks of shared changes on their way that the opening learned of (the load, or a
        // caller's section before it ended): a read this store's caches made before it may have
        // found a value such a change removes, which they must not keep (the rest of what the load
        // read is the container as it is, and needs no telling). Taken with the end of the
        // opening: a section after it tells its own news.
        let (startsWriter, markNews) = withState { state in
            state.isLoaded = true
            defer { state.newMarkNews = PeerNews() }
            return (state.applyEarlyAccesses(), state.newMarkNews)
        }
        if startsWriter || accessesStartWriter { startWriter() }
        loaded.leave()
        Self.testHooks.run(.loadedBeforeTelling, at: directory.path)
        markNews.deliver(toEveryCacheOf: self)
        // Only now: a fill such a read stored before its cache heard of the mark is queued by now,
        // and must not land (told earlier, the fill queued after would have been taken for one
        // that read the key after the change).
        didTell(news)
    }

    /// Runs `body` on the state once the index has loaded (see ``finishOpening()``), waiting for it.
    ///
    /// Waits on the writer's queue, never on the cooperative pool's work: the load runs first there.
    func withLoadedState<Result>(_ body: (inout State) -> Result) -> Result {
        var result: Result?
        withState { state in
            if state.isLoaded { result = body(&state) }
        }
        if let result { return result }
        loaded.wait()
        return withState(body)
    }

    deinit {
        if withState({ $0.isLoading && !$0.isLoaded }) { loaded.leave() }
        var messages = DeferredLog()
        if let folder = options.removedWhenClosed {
            // The writer holds the store while it works, so nothing writes any more.
            do {
                try FileManager.default.removeItem(at: folder)
            } catch {
                messages.add(.warning, "Cannot remove the temporary container \(folder.path): \(error)")
            }
        } else if withState({ $0.changesSinceSave > 0 }) {
            // The caches are gone: nobody is left to hear what other processes changed. The order
            // reads changed is only in snapshots: it is saved now.
            var news = PeerNews()
            saveIndex(always: withState { $0.accessesSinceSave > 0 }, log: &messages, news: &news)
        }
        let descriptor = withState { $0.journal.descriptor }
        if descriptor >= 0 { close(descriptor) }
        messages.flush()
    }

    /// Runs `body` holding the state lock.
    ///
    /// `body` must only read and change the state: no I/O, no user code, no other lock.
    @inline(__always)
    func withState<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        #if DEBUG
        DiskLockOrder.willTakeStateLock()
        defer { DiskLockOrder.didReleaseStateLock() }
        #endif
        return try lockedState.withLock(body)
    }

    /// Runs `body` holding `ioLock`; the caller must hold neither lock of any disk store.
    ///
    /// `body` may take the state lock, and must not call user code or observers.
    func withIOLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        #if DEBUG
        DiskLockOrder.willTakeIOLock()
        defer { DiskLockOrder.didReleaseIOLock() }
        #endif
        return try ioLock.withLock(body)
    }

    // MARK: - What the store holds

    /// The number of entry files.
    var count: Int { withLoadedState { $0.index.count } }

    /// The number of values the store holds: entry files, plus writes of new keys not landed yet,
    /// less removals not landed yet.
    ///
    /// - Complexity: O(p) in the number of pending operations.
    var valueCount: Int {
        withLoadedState { state in
            var count = state.index.count
            for (digest, pending) in state.pending {
                let isIndexed = state.index.contains(digest)
                switch pending.operation {
                case .write: if !isIndexed { count += 1 }
                case .remove: if isIndexed { count -= 1 }
                }
            }
            return count
        }
    }

    /// The total size in bytes of the entry files (writes not landed yet are not counted).
    var byteCount: Int { withLoadedState { $0.index.byteCount } }

    /// The keys of the entry files, next victim first, read from the files (see ``storedKey(of:)``);
    /// a file whose key cannot be read is left out.
    ///
    /// - Complexity: O(n) file reads.
    var keysInEvictionOrder: [String] {
        storedKeys(of: withLoadedState { $0.index.entriesInEvictionOrder.map(\.key) }).compactMap { $0 }
    }

    /// Whether the store holds a value for `key` (a pending write, or an entry file), without
    /// reading the file or counting an access.
    ///
    /// - Parameters:
    ///   - key: The key to look for.
    ///   - isLive: Tells whether an entry with an expiry is live; by default every entry is.
    /// - Returns: Whether a live value is stored or pending for `key`.
    /// ``contains(_:isLive:)`` without waiting: `nil` while the index loads.
    func containsIfLoaded(_ key: DiskKey, isLive: (Expiry) -> Bool) -> Bool? {
        withState { state in
            guard state.isLoaded else { return nil }
            if let operation = state.operationForReading(key.digest) {
                if case .write(let value) = operation { return isLive(value.expiresAt) }
                return false
            }
            return state.index.peek(key.digest).map { isLive($0.expiresAt) } ?? false
        }
    }

    func contains(_ key: DiskKey, isLive: (Expiry) -> Bool = { _ in true }) -> Bool {
        withLoadedState { state in
            if let operation = state.operationForReading(key.digest) {
                if case .write(let value) = operation { return isLive(value.expiresAt) }
                return false
            }
            return state.index.peek(key.digest).map { isLive($0.expiresAt) } ?? false
        }
    }

    /// The keys the store holds: pending writes and entry files, less pending removals, as stored
    /// in the entries (not derived from file names).
    ///
    /// The index keeps no keys in memory: the entry files' keys are read from their headers, holding
    /// no lock. A file removed meanwhile, or whose key cannot be read (damaged), is left out.
    ///
    /// - Parameter isLive: Tells whether an entry with an expiry is listed; by default every entry is.
    /// - Returns: The keys, entry files first (next victim first), then pending writes.
    /// - Complexity: O(n), with one read of each live entry file's header (on every core).
    func allKeys(isLive: (Expiry) -> Bool = { _ in true }) -> [String] {
        let (digests, pendingKeys) = withLoadedState { state in
            var digests: [SHA256Digest] = []
            digests.reserveCapacity(state.index.count)
            for entry in state.index.entriesInEvictionOrder
            where state.operationForReading(entry.key) == nil && isLive(entry.payload.expiresAt) {
                digests.append(entry.key)
            }
            var pendingKeys: [String] = []
            for pending in state.pending.values {
                if case .write(let value) = state.operationForReading(pending.key.digest), isLive(value.expiresAt) {
                    pendingKeys.append(pending.key.string)
                }
            }
            return (digests, pendingKeys)
        }
        return storedKeys(of: digests).compactMap { $0 } + pendingKeys
    }

    /// Removes a file of the container, logging a failure; an entry file that cannot be removed is
    /// never served again by this store (until a write of its key lands).
    ///
    /// Called holding `ioLock`, or while opening.
    func removeFile(_ name: String, log: inout DeferredLog) {
        do {
            try directory.remove(name)
            if let digest = SHA256Digest(hex: name) { withState { _ = $0.unremovable.remove(digest) } }
        } catch {
            log.add(.error, "Cannot remove \(directory.path)/\(name): \(error)")
            if ContainerFile.isEntryName(name), let digest = SHA256Digest(hex: name) {
                withState { _ = $0.unremovable.insert(digest) }
            }
        }
    }
}
