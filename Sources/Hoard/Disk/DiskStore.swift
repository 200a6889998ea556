import Dispatch
import Foundation

/// Told by a disk store what became of the writes a cache enqueued, and of changes made by others.
///
/// Every method is called outside the store's locks, from the store's background writer or from the
/// thread of the cache that made the change.
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
}

/// A value waiting for the background writer, readable until it lands.
struct PendingValue: Sendable {
    /// The value as it was set; a reader of the same type takes it as it is.
    let value: any Sendable
    /// Encodes the value with the serializer of the cache that set it.
    let serialize: @Sendable () throws -> Data
    /// When the value stops being live.
    let expiresAt: Expiry
}

/// What the disk level holds for a key.
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
/// Two locks: `lock` guards the in-memory state and is never held across I/O or user code;
/// `ioLock` is held by whoever changes files (the writer, one operation at a time, and
/// ``removeAll()``), so that no write lands after a clear that followed it. Readers never take `ioLock`
/// except to repair a damaged file.
@usableFromInline
final class DiskStore: @unchecked Sendable {
    // Safe because `state` is only touched while holding `lock`, and everything else is immutable.

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

        /// The options as a store applies them: a capacity of at least 1, a byte limit of at least 0.
        var normalized: Options {
            var options = self
            options.capacity = max(1, capacity)
            options.byteLimit = byteLimit.map { max(0, $0) }
            return options
        }
    }

    private enum Operation {
        case write(PendingValue)
        case remove
    }

    private struct Pending {
        var key: DiskKey
        var generation: UInt64
        var operation: Operation
        weak var observer: (any DiskStoreObserver)?
        /// Whether the key is in the queue; false once the writer has taken the operation, so that a
        /// newer operation queues the key again.
        var isQueued = true
    }

    private enum QueueItem {
        case key(SHA256Digest)
        case flush(CheckedContinuation<Void, Never>)
    }

    private struct WeakObserver {
        weak var observer: (any DiskStoreObserver)?
    }

    private struct State {
        var index: DiskEntryIndex
        var pending: [SHA256Digest: Pending] = [:]
        var queue: [QueueItem] = []
        var queueHead = 0
        var isDraining = false
        var generation: UInt64 = 0
        var changesSinceSave = 0
        var observers: [ObjectIdentifier: WeakObserver] = [:]
    }

    /// How many changes (writes, removals, hits) the writer lets pass before saving the index when idle.
    static let changesBetweenIndexSaves = 1_000

    let directory: Directory
    let options: Options
    private let lock = Lock()
    private let ioLock = Lock()
    private var state: State
    private let writer: DispatchQueue

    /// Opens the container at `url`, creating it (mode 0700) if needed, locks it against other
    /// processes, and loads its entries.
    ///
    /// - Throws: ``CacheError`` with code `containerInUse` when another process has it open, or with
    ///   code `io` when the container cannot be created or listed.
    convenience init(at url: URL, options: Options) throws {
        var messages = DeferredLog()
        try self.init(at: url, options: options, log: &messages)
        messages.flush()
    }

    /// Opens the container, keeping what it reports in `log` so that the caller can send it once
    /// it has released its locks.
    init(at url: URL, options: Options, log: inout DeferredLog) throws {
        let options = options.normalized
        self.options = options
        directory = try Directory(creatingAt: url, log: &log)
        writer = DispatchQueue(label: "Hoard.DiskStore.writer")
        state = State(index: DiskEntryIndex(policy: options.policy, capacity: options.capacity))
        state.index = try loadIndex(log: &log)
    }

    deinit {
        var messages = DeferredLog()
        if state.changesSinceSave > 0 { saveIndex(log: &messages) }
        messages.flush()
    }

    // MARK: - Sharing one store per container

    private struct WeakStore {
        weak var store: DiskStore?
    }

    private static let openStores = Locked<[String: WeakStore]>([:])

    /// Returns the store already open on this container in this process, or opens one.
    ///
    /// Two stores on one folder would overwrite each other's index and miss each other's pending
    /// writes, so a process keeps one per folder, found by the folder's real path (symbolic links
    /// resolved once the folder exists).
    ///
    /// - Throws: ``CacheError`` with code `invalidConfiguration` when the container is already open
    ///   with another count limit, byte limit, eviction policy or schema version (one store cannot keep
    ///   two limits), with code `containerInUse` when another process has it open (see
    ///   ``ContainerLock``), or with code `io` when the container cannot be created.
    static func shared(at url: URL, options: Options) throws -> DiskStore {
        let path = try Directory.create(at: url)
        let options = options.normalized
        var messages = DeferredLog()
        defer { messages.flush() }
        return try openStores.withLock { stores in
            stores = stores.filter { $0.value.store != nil }
            if let store = stores[path]?.store {
                guard store.options == options else {
                    throw CacheError.invalidConfiguration(
                        "The container \(path) is already open in this process with maxDiskCount "
                            + "\(store.options.capacity), byte limit \(Self.describe(store.options.byteLimit)), "
                            + "evictionPolicy \(store.options.policy) and schema version "
                            + "\(store.options.schemaVersion); open it with the same settings (asked: "
                            + "\(options.capacity), \(Self.describe(options.byteLimit)), \(options.policy), "
                            + "\(options.schemaVersion))."
                    )
                }
                return store
            }
            let store = try DiskStore(
                at: URL(fileURLWithPath: path, isDirectory: true),
                options: options,
                log: &messages
            )
            stores[path] = WeakStore(store: store)
            return store
        }
    }

    private static func describe(_ byteLimit: Int?) -> String { byteLimit.map(String.init) ?? "none" }

    /// The caches registered on this store, except `origin`.
    func observers(except origin: (any DiskStoreObserver)?) -> [any DiskStoreObserver] {
        lock.withLock { otherObservers(than: origin) }
    }

    /// Registers a cache to hear of changes that other caches make to this container.
    func addObserver(_ observer: any DiskStoreObserver) {
        lock.withLock { state.observers[ObjectIdentifier(observer)] = WeakObserver(observer: observer) }
    }

    /// Stops telling a cache of changes.
    func removeObserver(_ observer: any DiskStoreObserver) {
        lock.withLock { state.observers[ObjectIdentifier(observer)] = nil }
    }

    // MARK: - Reading

    /// The number of entry files.
    var count: Int { lock.withLock { state.index.count } }

    /// The total size in bytes of the entry files (writes not landed yet are not counted).
    var byteCount: Int { lock.withLock { state.index.byteCount } }

    /// The keys of the entry files, next victim first.
    ///
    /// - Complexity: O(n).
    var keysInEvictionOrder: [String] { lock.withLock { state.index.entriesInEvictionOrder.map(\.payload.key) } }

    /// Whether the store holds a value for `key` (a pending write, or an entry file), without
    /// reading the file or counting an access.
    ///
    /// - Parameters:
    ///   - key: The key to look for.
    ///   - isLive: Tells whether an entry with an expiry is live; by default every entry is.
    /// - Returns: Whether a live value is stored or pending for `key`.
    func contains(_ key: DiskKey, isLive: (Expiry) -> Bool = { _ in true }) -> Bool {
        lock.withLock {
            if let pending = state.pending[key.digest] {
                if case .write(let value) = pending.operation { return isLive(value.expiresAt) }
                return false
            }
            return state.index.peek(key.digest).map { isLive($0.expiresAt) } ?? false
        }
    }

    /// The keys the store holds: pending writes and entry files, less pending removals, as stored
    /// in the entries (not derived from file names).
    ///
    /// - Parameter isLive: Tells whether an entry with an expiry is listed; by default every entry is.
    /// - Returns: The keys, entry files first (next victim first), then pending writes.
    /// - Complexity: O(n).
    func allKeys(isLive: (Expiry) -> Bool = { _ in true }) -> [String] {
        lock.withLock {
            var keys: [String] = []
            keys.reserveCapacity(state.index.count + state.pending.count)
            for entry in state.index.entriesInEvictionOrder
            where state.pending[entry.key] == nil && isLive(entry.payload.expiresAt) {
                keys.append(entry.payload.key)
            }
            for pending in state.pending.values {
                if case .write(let value) = pending.operation, isLive(value.expiresAt) {
                    keys.append(pending.key.string)
                }
            }
            return keys
        }
    }

    /// Returns what the store holds for `key`; a stored entry's read counts as an access unless
    /// `countsAccess` is false.
    ///
    /// A damaged, truncated or foreign file is removed, logged and reported as a miss.
    /// - Complexity: O(1) and, when the key has a file, one file read.
    func lookup(_ key: DiskKey, countsAccess: Bool = true) -> DiskLookup {
        lock.lock()
        if let pending = state.pending[key.digest] {
            lock.unlock()
            if case .write(let value) = pending.operation { return .pending(value) }
            return .miss
        }
        let isIndexed = state.index.contains(key.digest)
        lock.unlock()
        guard isIndexed else { return .miss }

        switch readEntry(key) {
        case .success(let entry):
            guard countsAccess else { return .stored(entry) }
            let startsWriter = lock.withLock {
                guard state.index.access(key.digest) != nil else { return false }
                state.changesSinceSave += 1
                // A read-only workload still saves the order it changes, from the writer.
                // Saving is O(n): wait for more changes as the store grows, so it stays O(1) amortised.
                let threshold = max(Self.changesBetweenIndexSaves, state.index.count)
                guard state.changesSinceSave >= threshold, !state.isDraining else { return false }
                state.isDraining = true
                return true
            }
            if startsWriter { writer.async { self.drain() } }
            return .stored(entry)
        case .failure:
            repair(key)
            return .miss
        }
    }

    private enum ReadProblem: Error, CustomStringConvertible {
        case missing
        case unreadable(POSIXFileError)
        case damaged(EntryFormat.Damage)
        case foreignKey(String)
        case otherVersion(UInt32)

        var description: String {
            switch self {
            case .missing: "the file is gone"
            case .unreadable(let error): "\(error)"
            case .damaged(let damage): "\(damage)"
            case .foreignKey(let key): "it holds another key (\"\(key.prefix(100))\")"
            case .otherVersion(let version): "it was written under schema version \(version)"
            }
        }
    }

    private func readEntry(_ key: DiskKey) -> Result<EntryFormat.Entry, ReadProblem> {
        let bytes: [UInt8]
        do {
            guard let read = try directory.read(key.fileName) else { return .failure(.missing) }
            bytes = read
        } catch {
            return .failure(.unreadable(error))
        }
        let entry: EntryFormat.Entry
        do {
            entry = try EntryFormat.decode(bytes)
        } catch {
            return .failure(.damaged(error))
        }
        guard entry.key == key.string else { return .failure(.foreignKey(entry.key)) }
        guard entry.schemaVersion == options.schemaVersion else { return .failure(.otherVersion(entry.schemaVersion)) }
        return .success(entry)
    }

    /// Removes the file of `key` if it is still unusable once the writer is out of the way.
    ///
    /// The file is read again under `ioLock`: the first read may have raced with the writer replacing
    /// it, and a transient failure (too many open files) is not damage.
    private func repair(_ key: DiskKey) {
        settle(key) { log in
            let confirmed: ReadProblem
            switch readEntry(key) {
            case .success: return false
            case .failure(.unreadable(let error)) where error.errorNumber != EISDIR && error.errorNumber != ELOOP:
                // A transient failure (too many open files, a permission problem): keep the file.
                log.add(.warning, "Cannot read the entry for key \"\(key.string.prefix(100))\": \(error)")
                return false
            case .failure(let problem): confirmed = problem
            }
            if case .missing = confirmed {
                log.add(
                    .warning,
                    "The entry file \(directory.path)/\(key.fileName) for key \"\(key.string.prefix(100))\" vanished."
                )
            } else {
                log.add(
                    .warning,
                    "Removed the entry file \(directory.path)/\(key.fileName) for key \"\(key.string.prefix(100))\": "
                        + "\(confirmed)."
                )
                removeFile(key.fileName, log: &log)
            }
            return true
        }
    }

    /// Removes the entry of `key` if it still holds `payload` (and expires at `expiresAt`, when
    /// given) and no newer operation is pending.
    ///
    /// For bytes the serializer could not decode, or an expired entry: a newer set that landed or is
    /// pending must survive.
    /// - Returns: Whether the entry was removed.
    @discardableResult
    func removeIfUnchanged(_ key: DiskKey, payload: Data, expiresAt: Expiry? = nil) -> Bool {
        settle(key) { log in
            guard case .success(let entry) = readEntry(key), entry.payload == payload else { return false }
            if let expiresAt, entry.expiresAt != expiresAt { return false }
            removeFile(key.fileName, log: &log)
            return true
        }
    }

    /// Removes every entry file (not pending write) that expires at or before `now`.
    ///
    /// - Returns: The keys removed.
    /// - Complexity: O(n) in the number of entries, plus one file removal per expired entry; waits for
    ///   a disk write in progress.
    func removeExpired(now: Double) -> [String] {
        var messages = DeferredLog()
        ioLock.lock()
        defer {
            ioLock.unlock()
            messages.flush()
        }
        let expired = lock.withLock {
            state.index.entriesInEvictionOrder.filter { entry in
                entry.payload.expiresAt.isExpired(at: now) && state.pending[entry.key] == nil
            }
        }
        for entry in expired {
            removeFile(entry.key.hex, log: &messages)
        }
        lock.withLock {
            for entry in expired where state.index.removeValue(forKey: entry.key) != nil {
                state.changesSinceSave += 1
            }
        }
        if !expired.isEmpty { messages.add(.debug, "Removed \(expired.count) expired entries from \(directory.path).") }
        return expired.map(\.payload.key)
    }

    /// Runs `removesEntry` holding `ioLock`, unless a newer operation on `key` is pending or its entry
    /// is gone already; forgets the entry when `removesEntry` returns true.
    ///
    /// Logs after releasing `ioLock`.
    @discardableResult
    private func settle(_ key: DiskKey, _ removesEntry: (inout DeferredLog) -> Bool) -> Bool {
        var messages = DeferredLog()
        ioLock.lock()
        defer {
            ioLock.unlock()
            messages.flush()
        }
        // A newer operation, or a removal that already landed, explains whatever the caller saw.
        if lock.withLock({ state.pending[key.digest] != nil || !state.index.contains(key.digest) }) { return false }
        guard removesEntry(&messages) else { return false }
        lock.withLock {
            if state.index.removeValue(forKey: key.digest) != nil { state.changesSinceSave += 1 }
        }
        return true
    }

    private func removeFile(_ name: String, log: inout DeferredLog) {
        do {
            try directory.remove(name)
        } catch {
            log.add(.error, "Cannot remove \(directory.path)/\(name): \(error)")
        }
    }

    // MARK: - Writing

    /// Queues a write of `value` for `key`; readers see it at once, the file lands in the background.
    ///
    /// Writes and removals of one key apply in the order they were queued; the writer only writes the
    /// latest one.
    /// - Returns: The other caches on the container, which the caller must tell (outside its locks)
    ///   that `key` changed.
    func enqueueWrite(
        _ key: DiskKey,
        value: PendingValue,
        observer: (any DiskStoreObserver)?
    )
        -> [any DiskStoreObserver]
    {
        enqueue(key, .write(value), observer: observer)
    }

    /// Queues a removal of `key`; readers miss it at once, the file goes in the background.
    ///
    /// - Returns: The other caches on the container, to be told that `key` changed.
    func enqueueRemove(_ key: DiskKey, observer: (any DiskStoreObserver)?) -> [any DiskStoreObserver] {
        enqueue(key, .remove, observer: observer)
    }

    private func enqueue(
        _ key: DiskKey,
        _ operation: Operation,
        observer: (any DiskStoreObserver)?
    )
        -> [any DiskStoreObserver]
    {
        lock.lock()
        state.generation &+= 1
        if state.pending[key.digest]?.isQueued != true {
            state.queue.append(.key(key.digest))
        }
        state.pending[key.digest] = Pending(
            key: key,
            generation: state.generation,
            operation: operation,
            observer: observer
        )
        let startsWriter = !state.isDraining
        state.isDraining = true
        let others = otherObservers(than: observer)
        lock.unlock()
        if startsWriter { writer.async { self.drain() } }
        return others
    }

    private func otherObservers(than origin: (any DiskStoreObserver)?) -> [any DiskStoreObserver] {
        // The common case, one cache alone on its container, allocates nothing.
        if state.observers.isEmpty || (origin != nil && state.observers.count == 1) { return [] }
        let originID = origin.map(ObjectIdentifier.init)
        return state.observers.compactMap { id, box in id == originID ? nil : box.observer }
    }

    /// Waits until every write and removal queued before the call is on disk, and the index is saved.
    func flush() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            lock.lock()
            state.queue.append(.flush(continuation))
            let startsWriter = !state.isDraining
            state.isDraining = true
            lock.unlock()
            if startsWriter { writer.async { self.drain() } }
        }
    }

    /// Removes every entry file, pending write and temporary file; waits for a write in progress.
    ///
    /// - Complexity: O(n) file removals.
    func removeAll() {
        var messages = DeferredLog()
        ioLock.lock()
        defer {
            ioLock.unlock()
            messages.flush()
        }
        lock.withLock {
            state.index.removeAll()
            state.pending.removeAll()
            state.changesSinceSave += 1
        }
        do {
            for (name, _, _) in try directory.list()
            where ContainerFile.isEntryName(name) || name.hasPrefix(ContainerFile.temporaryPrefix) {
                removeFile(name, log: &messages)
            }
        } catch {
            messages.add(.error, "Cannot list the container \(directory.path) to clear it: \(error)")
        }
        saveIndex(log: &messages)
    }

    /// What the writer must do once it has released `ioLock`: tell caches, log.
    private enum Effect {
        case evicted(key: String, reason: EvictionReason, observer: (any DiskStoreObserver)?)
        case failed(key: String, error: CacheError, observer: (any DiskStoreObserver)?)
    }

    /// The background writer's loop: applies queued items in order until the queue is empty.
    ///
    /// Each item is applied holding `ioLock`; what it must report (evictions, failures, log messages)
    /// is reported after `ioLock` is released, so a delegate may call anything on the cache.
    private func drain() {
        while true {
            lock.lock()
            guard state.queueHead < state.queue.count else {
                state.queue.removeAll(keepingCapacity: state.queue.count < 4_096)
                state.queueHead = 0
                state.isDraining = false
                let savesIndex = state.changesSinceSave >= max(Self.changesBetweenIndexSaves, state.index.count)
                lock.unlock()
                if savesIndex {
                    var messages = DeferredLog()
                    ioLock.withLock { saveIndex(log: &messages) }
                    messages.flush()
                }
                return
            }
            let item = state.queue[state.queueHead]
            state.queueHead += 1
            if state.queueHead >= 1_024 && state.queueHead * 2 >= state.queue.count {
                // Under steady load the writer never sees an empty queue: drop what it has done.
                state.queue.removeFirst(state.queueHead)
                state.queueHead = 0
            }
            lock.unlock()

            var messages = DeferredLog()
            switch item {
            case .flush(let continuation):
                ioLock.withLock {
                    if lock.withLock({ state.changesSinceSave > 0 }) { saveIndex(log: &messages) }
                }
                messages.flush()
                continuation.resume()
            case .key(let digest):
                ioLock.lock()
                let effects = apply(digest, log: &messages)
                ioLock.unlock()
                messages.flush()
                for effect in effects {
                    switch effect {
                    case .evicted(let key, let reason, let observer):
                        observer?.diskStore(willEvictKey: key, reason: reason)
                    case .failed(let key, let error, let observer):
                        observer?.diskStore(didFailToStoreKey: key, error: error)
                    }
                }
            }
        }
    }

    /// Applies the latest pending operation of one key.
    ///
    /// Called by the writer, holding `ioLock`.
    /// - Returns: What to report once `ioLock` is released.
    private func apply(_ digest: SHA256Digest, log: inout DeferredLog) -> [Effect] {
        // Read the operation only now, under `ioLock`, so that a clear that ran meanwhile wins.
        let taken = lock.withLock { () -> Pending? in
            state.pending[digest]?.isQueued = false
            return state.pending[digest]
        }
        guard let pending = taken else { return [] }
        let key = pending.key
        switch pending.operation {
        case .remove:
            removeFile(key.fileName, log: &log)
            lock.withLock {
                state.index.removeValue(forKey: digest)
                state.changesSinceSave += 1
                finish(pending)
            }
            return []
        case .write(let value):
            do {
                let bytes = try encode(value, for: key)
                if let byteLimit = options.byteLimit, bytes.count > byteLimit {
                    // Not kept, and not written: an older value of the key must not be served either.
                    removeFile(key.fileName, log: &log)
                    lock.withLock {
                        state.index.removeValue(forKey: digest)
                        state.changesSinceSave += 1
                        finish(pending)
                    }
                    log.add(
                        .info,
                        "Did not keep the value for key \"\(key.string.prefix(100))\" on disk: its entry "
                            + "(\(bytes.count) bytes) is larger than the byte limit (\(byteLimit) bytes)."
                    )
                    return [.evicted(key: key.string, reason: .cost, observer: pending.observer)]
                }
                try write(bytes, for: key)
                let info = DiskEntryInfo(key: key.string, size: bytes.count, expiresAt: value.expiresAt)
                let victims = lock.withLock {
                    let victims: [DiskEntryIndex.Victim]
                    if state.index.contains(digest) {
                        // A replacement keeps its place (and access count); it may need room for more bytes.
                        state.index.upsert(info, forKey: digest)
                        victims = state.index.makeRoom(
                            forCount: 0,
                            bytes: 0,
                            capacity: options.capacity,
                            byteLimit: options.byteLimit,
                            sparing: digest
                        )
                    } else {
                        victims = state.index.makeRoom(
                            forCount: 1,
                            bytes: info.size,
                            capacity: options.capacity,
                            byteLimit: options.byteLimit
                        )
                        state.index.upsert(info, forKey: digest)
                    }
                    state.changesSinceSave += 1 + victims.count
                    finish(pending)
                    return victims.map { (key: $0.payload.key, reason: $0.reason) }
                }
                // The victims are out of the index: readers miss them already. Their files go now;
                // the delegate hears "will evict" right after, once `ioLock` is released.
                for victim in victims {
                    log.add(.debug, "Evicted \"\(victim.key.prefix(100))\" from disk (\(options.policy)).")
                    removeFile(DiskKey(victim.key).fileName, log: &log)
                }
                return victims.map { .evicted(key: $0.key, reason: $0.reason, observer: pending.observer) }
            } catch {
                // The old file holds an older value than the one that failed: it must not be served.
                removeFile(key.fileName, log: &log)
                lock.withLock {
                    state.index.removeValue(forKey: digest)
                    state.changesSinceSave += 1
                    finish(pending)
                }
                // An I/O error's cause (no space left, permission denied) and path are in the underlying error.
                let cause = error.code == .io ? error.underlyingError.map { " \($0)" } ?? "" : ""
                log.add(.warning, error.message + cause)
                return [.failed(key: key.string, error: error, observer: pending.observer)]
            }
        }
    }

    /// Drops a pending entry once applied, unless a newer operation replaced it meanwhile.
    private func finish(_ applied: Pending) {
        if state.pending[applied.key.digest]?.generation == applied.generation {
            state.pending[applied.key.digest] = nil
        }
    }

    /// Serializes a value and encodes its entry file.
    private func encode(_ value: PendingValue, for key: DiskKey) throws(CacheError) -> [UInt8] {
        let payload: Data
        do {
            payload = try value.serialize()
        } catch {
            throw CacheError.serializationFailed(key: key.string, underlying: error)
        }
        guard payload.count <= EntryFormat.maximumFieldSize, key.string.utf8.count <= EntryFormat.maximumFieldSize
        else {
            throw CacheError.io("The value for key \"\(key.string.prefix(100))\" is too large for one entry file.")
        }
        return EntryFormat.encode(
            key: key.string,
            payload: payload,
            schemaVersion: options.schemaVersion,
            expiresAt: value.expiresAt
        )
    }

    /// Writes an entry file through a temporary file.
    private func write(_ bytes: [UInt8], for key: DiskKey) throws(CacheError) {
        do {
            try directory.writeAtomically(bytes, to: key.fileName, through: nextTemporaryName())
        } catch {
            throw CacheError.io(
                "Cannot write the entry for key \"\(key.string.prefix(100))\".",
                key: key.string,
                underlying: error
            )
        }
    }

    /// Numbers temporary files; process-wide, so that two stores never pick the same name.
    private static let temporaryCounter = Locked<UInt64>(0)

    private func nextTemporaryName() -> String {
        let number = Self.temporaryCounter.withLock { counter in
            counter &+= 1
            return counter
        }
        return "\(ContainerFile.temporaryPrefix)\(getpid())-\(number)"
    }

    // MARK: - The saved index

    /// Writes the eviction order to the index file.
    ///
    /// Called holding `ioLock`, or from `deinit`.
    private func saveIndex(log: inout DeferredLog) {
        let records = lock.withLock {
            state.changesSinceSave = 0
            return state.index.entriesInEvictionOrder.map { entry in
                DiskIndexFile.Record(digest: entry.key, count: entry.count, info: entry.payload)
            }
        }
        do {
            try directory.writeAtomically(
                DiskIndexFile.encode(records),
                to: ContainerFile.index,
                through: nextTemporaryName()
            )
        } catch {
            log.add(.warning, "Cannot save the index of \(directory.path): \(error)")
        }
    }

    /// Lists the container, sweeps temporary files, and rebuilds the eviction order from the saved
    /// index and the entry files.
    private func loadIndex(log: inout DeferredLog) throws -> DiskEntryIndex {
        let listing: [(name: String, modified: Double, size: Int)]
        do {
            listing = try directory.list()
        } catch {
            throw CacheError.io("Cannot list the container \(directory.path).", underlying: error)
        }
        var unindexed: [String: Double] = [:]
        // The sizes of the files, not those the index saved: a process killed after rewriting an
        // entry but before saving the index leaves a stale size there.
        var sizes: [String: Int] = [:]
        var hasIndexFile = false
        for (name, modified, size) in listing {
            if name.hasPrefix(ContainerFile.temporaryPrefix) {
                removeFile(name, log: &log)
            } else if ContainerFile.isEntryName(name) {
                unindexed[name] = modified
                sizes[name] = size
            } else if name == ContainerFile.index {
                hasIndexFile = true
            }
        }

        var index = DiskEntryIndex(policy: options.policy, capacity: options.capacity)
        let saved =
            hasIndexFile
            ? (try? directory.read(ContainerFile.index))?.flatMap { bytes in
                bytes.withUnsafeBytes { DiskIndexFile.decode($0) }
            } : nil
        if let saved {
            for record in saved where unindexed.removeValue(forKey: record.digest.hex) != nil {
                var info = record.info
                info.size = sizes[record.digest.hex] ?? info.size
                index.append(info, forKey: record.digest, count: record.count)
            }
        } else if hasIndexFile {
            log.add(.warning, "The index of \(directory.path) is damaged; rebuilding it from the entry files.")
            // Whatever holds the name (an empty folder, say) would stop the index from being saved.
            removeFile(ContainerFile.index, log: &log)
        }
        if !unindexed.isEmpty {
            log.add(
                .info,
                "Reading \(unindexed.count) entry file(s) of \(directory.path) missing from its index."
            )
        }
        for (name, _) in unindexed.sorted(by: { ($0.value, $0.key) < ($1.value, $1.key) }) {
            if let info = validEntry(named: name, log: &log) {
                index.append(info.info, forKey: info.digest, count: 1)
            } else {
                removeFile(name, log: &log)
            }
        }
        var victims: [DiskEntryIndex.Victim] = []
        if let byteLimit = options.byteLimit {
            // An entry larger than the whole limit goes alone, not with every entry before it.
            for entry in index.entriesInEvictionOrder where entry.payload.size > byteLimit {
                index.removeValue(forKey: entry.key)
                victims.append((entry.key, entry.payload, .cost))
            }
        }
        victims += index.makeRoom(
            forCount: 0,
            bytes: 0,
            capacity: options.capacity,
            byteLimit: options.byteLimit
        )
        for victim in victims {
            log.add(.debug, "Evicted \"\(victim.payload.key.prefix(100))\" from disk to fit the count and byte limits.")
            removeFile(victim.key.hex, log: &log)
        }
        state.changesSinceSave = saved == nil || !unindexed.isEmpty || !victims.isEmpty ? 1 : 0
        return index
    }

    /// Reads a file found in the container; returns its entry if it is intact and named by its key.
    private func validEntry(named name: String, log: inout DeferredLog) -> (digest: SHA256Digest, info: DiskEntryInfo)?
    {
        guard let digest = SHA256Digest(hex: name) else { return nil }
        do {
            guard let bytes = try directory.read(name) else { return nil }
            let entry = try EntryFormat.decode(bytes)
            guard DiskKey(entry.key).digest == digest else {
                log.add(.warning, "Removed \(directory.path)/\(name): it holds another key's entry.")
                return nil
            }
            guard entry.schemaVersion == options.schemaVersion else {
                log.add(
                    .info,
                    "Removed \(directory.path)/\(name): written under schema version \(entry.schemaVersion)."
                )
                return nil
            }
            return (
                digest,
                DiskEntryInfo(key: entry.key, size: bytes.count, expiresAt: entry.expiresAt)
            )
        } catch {
            log.add(.warning, "Removed the damaged entry file \(directory.path)/\(name): \(error).")
            return nil
        }
    }
}

extension DiskStore {
    /// Checks the store against its folder and its limits; returns what is wrong, if anything.
    ///
    /// Holds the I/O lock, so no write is half done. Every indexed entry without a pending operation
    /// must have a file of the indexed size; every entry file must be indexed or pending; no
    /// temporary file may remain; the byte count must be the sum of the sizes; and once nothing is
    /// pending, the count and byte limits must hold. For tests and debugging (see
    /// `Cache.validateInvariants()`).
    ///
    /// - Complexity: O(n), and one listing of the folder.
    func invariantViolations() -> [String] {
        ioLock.lock()
        defer { ioLock.unlock() }
        var problems: [String] = []
        let files: [String: Int]
        do {
            files = Dictionary(try directory.list().map { ($0.name, $0.size) }, uniquingKeysWith: { first, _ in first })
        } catch {
            return ["cannot list the container: \(error)"]
        }
        lock.withLock {
            state.index.checkInvariants()
            let entries = state.index.entriesInEvictionOrder
            var total = 0
            for entry in entries {
                total += entry.payload.size
                guard state.pending[entry.key] == nil else { continue }
                let name = entry.key.hex
                if files[name] == nil {
                    problems.append("indexed entry \(name) (\"\(entry.payload.key.prefix(40))\") has no file")
                } else if files[name] != entry.payload.size {
                    problems.append("entry \(name) is \(files[name] ?? 0) bytes, indexed as \(entry.payload.size)")
                }
            }
            if total != state.index.byteCount { problems.append("byte count \(state.index.byteCount) ≠ sum \(total)") }
            for name in files.keys {
                if name.hasPrefix(ContainerFile.temporaryPrefix) { problems.append("temporary file \(name) left") }
                if ContainerFile.isEntryName(name), let digest = SHA256Digest(hex: name),
                    !state.index.contains(digest), state.pending[digest] == nil
                {
                    problems.append("entry file \(name) is not indexed")
                }
            }
            if state.pending.isEmpty {
                if state.index.count > options.capacity { problems.append("\(state.index.count) entries > capacity") }
                if let byteLimit = options.byteLimit, state.index.byteCount > byteLimit {
                    problems.append("\(state.index.byteCount) bytes > byte limit \(byteLimit)")
                }
            }
        }
        return problems
    }
}
