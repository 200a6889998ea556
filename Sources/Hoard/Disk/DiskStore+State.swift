extension DiskStore {
    /// A queued change to one key.
    enum Operation: Sendable {
        case write(PendingValue)
        case remove
    }

    /// The latest operation queued for a key, readable until it lands.
    struct Pending: Sendable {
        var key: DiskKey
        /// Orders every operation of the store; a newer operation on the key has a higher one.
        var generation: UInt64
        var operation: Operation
        /// The cache that queued the operation, told of evictions and failures it causes.
        weak var observer: (any DiskStoreObserver)?
        /// Whether the key is in the queue; false once the writer has taken the operation, so that a
        /// newer operation queues the key again.
        var isQueued = true
        /// Told once the operation has landed (or failed), for `save`: with the operations it
        /// replaced before the writer took them.
        var completions: [Completion] = []
        /// Whether the operation is a fill that replaced a removal of its key before the writer took
        /// it (directly, or through the fills that replaced it): the removal is then made by this
        /// operation or not at all (see ``isOutdatedFill(_:)``).
        var replacesRemoval = false
    }

    /// Told, outside every lock, whether a queued write reached its file.
    typealias Completion = @Sendable (Result<Void, CacheError>) -> Void

    /// `completion`, answering the first call only.
    ///
    /// A clear answers the writes it drops at once, those the writer has taken in its current batch
    /// included (their serializers may run long, or wait); the writer, which holds its own copy of
    /// each, answers them again once it sees the clear. Only the first answer counts.
    static func once(_ completion: @escaping Completion) -> Completion {
        let answered = Locked(false)
        return { result in
            let isFirst = answered.withLock { answered in
                defer { answered = true }
                return !answered
            }
            if isFirst { completion(result) }
        }
    }

    /// An entry of the writer's queue.
    enum QueueItem: Sendable {
        /// Apply the latest operation pending for the key.
        case key(SHA256Digest)
        /// Catch up with other processes and write a snapshot if anything changed, then resume the
        /// caller of `flush()`.
        case flush(CheckedContinuation<Void, Never>)
    }

    /// A cache registered on the store, held weakly.
    struct WeakObserver: Sendable {
        weak var observer: (any DiskStoreObserver)?
    }

    /// What a caller must do once it has queued an operation.
    struct Enqueued {
        /// Whether the writer was idle and must be started.
        var startsWriter: Bool
        /// The other caches on the container, to be told that the key changed.
        var peers: [any DiskStoreObserver]
        /// The operation replaced, for the caller to release after unlocking: its value may hold the
        /// last reference to an object of the app, whose `deinit` must not run under the lock.
        var replaced: Pending?
    }

    /// What the writer does next.
    enum WriterStep {
        /// Prepare the operation outside every lock, then apply it if it is still current.
        case apply(Pending)
        /// Catch up with other processes, write a snapshot if anything changed, then resume the flush.
        case flush(CheckedContinuation<Void, Never>)
        /// Nothing left: the writer stops, after saving the index if `savesIndex`.
        case idle(savesIndex: Bool)
    }

    /// Everything a store knows in memory.
    ///
    /// Every change is a mutating method that returns what the store must do once the lock is
    /// released.
    ///
    /// Not thread-safe: the store keeps it in a ``Locked``.
    struct State: Sendable {
        let options: Options
        var index: DiskEntryIndex
        /// The latest operation of each key that has not landed yet.
        var pending: [SHA256Digest: Pending] = [:]
        var queue: [QueueItem] = []
        var queueHead = 0
        /// Whether the writer is running (or about to): the next change does not start it again.
        var isDraining = false
        var generation: UInt64 = 0
        /// The generation of the latest operation a clear dropped: operations up to it are cancelled.
        var clearedThrough: UInt64 = 0
        /// This store's changes (accesses included) not in a snapshot yet.
        var changesSinceSave = 0
        /// This store's reads that changed the eviction order since the last snapshot: the journal
        /// does not hold them.
        var accessesSinceSave = 0
        var observers: [ObjectIdentifier: WeakObserver] = [:]
        /// The clears of every value under way by caches on the store (see `DiskStore.beginClear`),
        /// each with the caches it told it began, those registered since included.
        var clearsUnderWay: [UInt64: [WeakObserver]] = [:]
        var lastClear: UInt64 = 0
        /// The disk cache levels that use the store (caches are its observers).
        var levelUsers = 0
        /// The index file and how far its journal has been applied; changed holding `ioLock`.
        var journal = SharedContainer.Cursor()
        /// Whether the opening scheduled the index load, and whether it has loaded (see
        /// `DiskStore.finishOpening()`).
        var isLoading = false
        var isLoaded = false
        /// The names of the temporary files that rebuilding the index in the current section found
        /// in its listing, for the sweep that follows in the same section (see
        /// `DiskStore.sweepTemporaryFiles(log:)`); `nil` outside such a section.
        var temporaryNamesListed: [String]?
        /// Reads of stored entries made before the index loaded, oldest first: applied to the eviction
        /// order once it has (see ``applyEarlyAccesses()``).
        var earlyAccesses: [SHA256Digest] = []
        /// The bytes of the container's own files besides the index (its manifest and lock file),
        /// measured when the store opened: with the index, they count against the byte limit.
        var fixedFileBytes = 0
        /// Entry files this store failed to remove (a read-only container): their values were
        /// replaced or removed, so reads miss them although the file is there.
        var unremovable: Set<SHA256Digest> = []
        /// The keys another process changed while an operation of theirs was pending here.
        ///
        /// For each, the generation of the latest operation queued then: a fill queued up to it read
        /// the key before that change, or cannot tell, and must not land over it (see
        /// ``isOutdatedFill(_:)``).
        var changedByPeersThrough: [SHA256Digest: UInt64] = [:]
        /// The generation of the latest operation queued when this store caught up with another
        /// process's clear: a fill queued up to it read its key before that clear, or cannot tell,
        /// and must not land after it (see ``isOutdatedFill(_:)``).
        var clearedByPeersThrough: UInt64 = 0
        /// How many clears by other processes this store caught up with and has not told all its
        /// caches of yet (see `DiskStore.didTell(_:)`).
        ///
        /// Until a cache hears of the clear, a fill it began before the clear is still stored, and
        /// its disk write queued: while any is untold, no fill lands (a miss later, never a value
        /// the clear removed).
        var peerClearsUntold = 0
        /// For each key another process put or removed, how many such changes this store caught up
        /// with and has not told all its caches of yet: no fill of the key lands meanwhile, as for
        /// ``peerClearsUntold``.
        var peerChangesUntold: [SHA256Digest: Int] = [:]
        /// The shared-level changes this store's caches queued, for the next section to journal
        /// before the removals or the clear they go with (see ``DiskJournal/Record/sharedPending(key:until:)``):
        /// the latest deadline of each key (`nil`: every key), one mark however often it changed.
        var sharedMarksToJournal: [String?: Double] = [:]
        /// The keys whose change on the shared level another process said is pending, with its
        /// deadline: reads do not ask the shared level for them until then.
        var peerSharedMarks: [String: Double] = [:]
        /// The deadline of a clear of the shared level another process said is pending.
        var peerSharedClearUntil = -Double.infinity
        /// The marks this store journaled whose deadline may not have passed: journaled again after
        /// a snapshot, which drops the journal that held them.
        var ownSharedMarks: [String?: Double] = [:]
        /// How many marks (``peerSharedMarks`` and ``ownSharedMarks``) the next catch-up drops the
        /// passed ones at.
        var sharedMarksDroppedAt = DiskStore.carriedMarkLimit
        /// The keys of the marks the catch-ups learned of until the index loaded.
        ///
        /// Every key when cleared: the news the opening's load, which tells no cache of what it read,
        /// delivers (see `DiskStore.finishOpening()`). Taken with the end of the opening, so that no
        /// section in between loses it; gathered no more once loaded.
        var newMarkNews = PeerNews()

        init(options: Options) {
            self.options = options
            index = DiskEntryIndex(policy: options.policy, capacity: options.capacity)
        }

        // MARK: Queueing

        /// Makes `operation` the latest of `key`, queueing the key unless it waits in the queue already.
        mutating func enqueue(
            _ key: DiskKey,
            _ operation: Operation,
            observer: (any DiskStoreObserver)?,
            completion: Completion? = nil
        ) -> Enqueued {
            generation &+= 1
            if pending[key.digest]?.isQueued != true {
                queue.append(.key(key.digest))
            }
            var latest = Pending(key: key, generation: generation, operation: operation, observer: observer)
            if let completion { latest.completions.append(DiskStore.once(completion)) }
            if let waiting = pending[key.digest], waiting.isQueued {
                // Replaced before the writer took it: its waiters are answered when this one lands.
                latest.completions = waiting.completions + latest.completions
                if case .write(let value) = operation, value.isFill {
                    if case .remove = waiting.operation {
                        latest.replacesRemoval = true
                    } else {
                        latest.replacesRemoval = waiting.replacesRemoval
                    }
                }
            }
            let replaced = pending.updateValue(latest, forKey: key.digest)
            return Enqueued(startsWriter: startWriter(), peers: observers(except: observer), replaced: replaced)
        }

        /// Queues a flush; returns whether the writer must be started.
        mutating func enqueueFlush(_ continuation: CheckedContinuation<Void, Never>) -> Bool {
            queue.append(.flush(continuation))
            return startWriter()
        }

        /// Marks the writer as running; returns whether it was idle (the caller must start it).
        private mutating func startWriter() -> Bool {
            defer { isDraining = true }
            return !isDraining
        }

        /// Takes the next item for the writer, skipping keys a clear emptied; marks the writer idle
        /// when none is left.
        mutating func takeNext() -> WriterStep {
            while queueHead < queue.count {
                let item = queue[queueHead]
                queueHead += 1
                if queueHead >= 1_024 && queueHead * 2 >= queue.count {
                    // Under steady load the writer never sees an empty queue: drop what it has done.
                    queue.removeFirst(queueHead)
                    queueHead = 0
                }
                switch item {
                case .flush(let continuation):
                    return .flush(continuation)
                case .key(let digest):
                    pending[digest]?.isQueued = false
                    if let taken = pending[digest] { return .apply(taken) }
                }
            }
            queue.removeAll(keepingCapacity: queue.count < 4_096)
            queueHead = 0
            isDraining = false
            return .idle(savesIndex: changesSinceSave >= indexSaveThreshold)
        }

        /// Takes the next item for the writer if it is an operation (not a flush), for a batch.
        mutating func takeNextWrite() -> Pending? {
            while queueHead < queue.count {
                guard case .key(let digest) = queue[queueHead] else { return nil }
                queueHead += 1
                pending[digest]?.isQueued = false
                if let taken = pending[digest] { return taken }
            }
            return nil
        }

        /// Whether `taken` is a fill whose key another process changed, or which another process's
        /// clear followed, as caught up with since it was queued: its bytes must not land over that
        /// change.
        ///
        /// A fill read its value from the shared level (or the fetcher) before it was queued; a change
        /// another process made meanwhile is only seen here when the writer catches up, in the section
        /// that would land the fill. Landing it anyway could put back what that process replaced (a
        /// save whose shared write came after the read), and a coherent process that would remove it
        /// on the change's invalidation may be dead by then. While a clear by another process (or a
        /// change of the fill's key) is not told to every cache yet, the fill does not land: one
        /// queued since the catch-up may have read its key before.
        func isOutdatedFill(_ taken: Pending) -> Bool {
            guard case .write(let value) = taken.operation, value.isFill else { return false }
            if taken.generation <= clearedByPeersThrough || peerClearsUntold > 0 { return true }
            if peerChangesUntold[taken.key.digest] != nil { return true }
            guard let through = changedByPeersThrough[taken.key.digest] else { return false }
            return taken.generation <= through
        }

        /// The operation a read of `digest` takes as the key's latest: the one pending, except an
        /// outdated fill (``isOutdatedFill(_:)``), which reads as what the writer will make of it:
        /// the removal it replaced, or nothing pending (the file, another process's, is read).
        ///
        /// The catch-up that outdated the fill has told the caches (their copies went) before the
        /// writer drops it: served until then, it would be copied back into memory and outlive the drop.
        func operationForReading(_ digest: SHA256Digest) -> Operation? {
            guard let taken = pending[digest] else { return nil }
            guard isOutdatedFill(taken) else { return taken.operation }
            return taken.replacesRemoval ? .remove : nil
        }

        /// Whether a clear dropped `taken` after the writer took it: its bytes must not land.
        ///
        /// Checked holding `ioLock`, right before the operation changes files. A newer operation on
        /// the key does not cancel `taken`: it is queued behind it on the same writer, so it lands
        /// after it (the key's latest value wins), and a flush queued between the two still finds
        /// `taken` on disk when it returns.
        func isCleared(_ taken: Pending) -> Bool {
            taken.generation <= clearedThrough
        }

        // MARK: Recording what landed (holding `ioLock`)

        /// Records that `applied`, an outdated fill, was dropped without changing any file.
        mutating func didDrop(_ applied: Pending) {
            finish(applied)
        }

        /// Records that the key of `applied` has no file any more (removed, not kept, or failed).
        mutating func didRemoveFile(of applied: Pending) {
            index.removeValue(forKey: applied.key.digest)
            changesSinceSave += 1
            finish(applied)
        }

        /// Records that the file of `applied` landed, with `info`, and evicts what no longer fits.
        ///
        /// - Returns: The entries evicted: out of the index already, their files still to remove.
        mutating func didWriteFile(of applied: Pending, info: DiskEntryInfo) -> [DiskEntryIndex.Victim] {
            let digest = applied.key.digest
            let victims: [DiskEntryIndex.Victim]
            if index.contains(digest) {
                // A replacement keeps its place (and access count); it may need room for more bytes.
                index.upsert(info, forKey: digest)
                victims = index.makeRoom(
                    forCount: 0,
                    bytes: 0,
                    capacity: options.capacity,
                    byteLimit: entryByteLimit(holding: index.count),
                    sparing: digest
                )
            } else {
                victims = index.makeRoom(
                    forCount: 1,
                    bytes: info.size,
                    capacity: options.capacity,
                    byteLimit: entryByteLimit(holding: index.count + 1)
                )
                index.upsert(info, forKey: digest)
            }
            changesSinceSave += 1 + victims.count
            unremovable.remove(digest)
            finish(applied)
            return victims
        }

        /// Drops a pending entry once applied, unless a newer operation replaced it meanwhile.
        ///
        /// The writer holds `applied` until it has released its locks, so the value dropped here is
        /// never the last reference to it.
        private mutating func finish(_ applied: Pending) {
            if pending[applied.key.digest]?.generation == applied.generation {
                pending[applied.key.digest] = nil
                changedByPeersThrough[applied.key.digest] = nil
            }
        }

        /// Records that `applied` failed without changing any file: the file its key may have holds
        /// an older value, which must not be served.
        mutating func didNotApply(_ applied: Pending) {
            unremovable.insert(applied.key.digest)
            finish(applied)
        }

        /// Forgets the entry of a file removed by a repair or a sweep.
        mutating func forgetEntry(_ digest: SHA256Digest) {
            if index.removeValue(forKey: digest) != nil { changesSinceSave += 1 }
        }

        /// Forgets every entry and pending operation (the files go next, holding `ioLock`).
        ///
        /// - Returns: The pending operations dropped, for the caller to release after unlocking.
        mutating func removeAll() -> [SHA256Digest: Pending] {
            index.removeAll()
            changesSinceSave += 1
            clearedThrough = generation
            changedByPeersThrough = [:]
            defer { pending = [:] }
            return pending
        }

        // MARK: Reading

        /// What a reader must do once it has recorded an access.
        enum AccessFollowUp {
            case nothing
            /// Start the writer, to save the index.
            case startWriter
            /// The first access made before the index loaded: keep the store open until the load,
            /// which applies it.
            case keepOpenUntilLoaded
        }

        /// Counts a read of `digest`'s file as an access, or keeps it for the load when the index
        /// has not loaded yet.
        mutating func recordAccess(_ digest: SHA256Digest) -> AccessFollowUp {
            guard isLoaded else {
                // Before the load, the index is empty: the access waits for it, or the first
                // eviction after the load would take what was just read.
                guard earlyAccesses.count < Self.earlyAccessLimit else { return .nothing }
                earlyAccesses.append(digest)
                return earlyAccesses.count == 1 ? .keepOpenUntilLoaded : .nothing
            }
            return countAccess(digest) ? .startWriter : .nothing
        }

        /// The most accesses kept for the load; later ones before it are not counted.
        static let earlyAccessLimit = 1 << 16

        /// Applies the accesses made before the index loaded, in the order they were made; call it
        /// once the index has loaded.
        ///
        /// - Returns: Whether the writer must be started (to save the index): the caller starts it
        ///   once the lock is released, or the next change would find it marked running and idle.
        mutating func applyEarlyAccesses() -> Bool {
            var startsWriter = false
            for digest in earlyAccesses where countAccess(digest) { startsWriter = true }
            earlyAccesses = []
            return startsWriter
        }

        /// Counts an access in the loaded index; returns whether the writer must be started to save
        /// the index.
        private mutating func countAccess(_ digest: SHA256Digest) -> Bool {
            guard index.access(digest) != nil else { return false }
            changesSinceSave += 1
            accessesSinceSave += 1
            // A read-only workload still saves the order it changes, from the writer.
            guard changesSinceSave >= indexSaveThreshold else { return false }
            return startWriter()
        }

        /// How many changes make the idle writer save the index.
        ///
        /// Saving is O(n): wait for more changes as the store grows, so it stays O(1) amortised.
        var indexSaveThreshold: Int { max(DiskStore.changesBetweenIndexSaves, index.count) }

        // MARK: The saved index

        /// The eviction order to write as a snapshot; the changes made so far count as saved.
        ///
        /// - Complexity: O(n).
        mutating func takeIndexSnapshot() -> [DiskIndexFile.Record] {
            changesSinceSave = 0
            accessesSinceSave = 0
            return index.entriesInEvictionOrder.map { entry in
                DiskIndexFile.Record(digest: entry.key, count: entry.count, info: entry.payload)
            }
        }

        /// Whether the journal has grown long enough to be folded into a new snapshot: as long as
        /// half the snapshot (at least 64 KiB), or as many records as the threshold; under a byte
        /// limit, longer than its ``journalAllowance(for:)``.
        ///
        /// Writing a snapshot is O(n); appending is O(1): a flush of a large container appends.
        var journalIsLong: Bool {
            if let byteLimit = options.byteLimit, options.limitsOwnFiles, journal.bytes > 0,
                journal.bytes > Self.journalAllowance(for: byteLimit) || isOverByteLimit(byteLimit)
            {
                return true
            }
            return journal.records >= indexSaveThreshold || journal.bytes > max(journal.snapshotBytes / 2, 1 << 16)
        }

        /// Whether the container's files, the journal included, take more than `byteLimit`: a
        /// section that journaled without evicting (removals, refused values) after a snapshot grew
        /// may leave them so, and folding the journal into a snapshot of the entries held brings
        /// them back within it (the entries were admitted leaving room for that snapshot).
        private func isOverByteLimit(_ byteLimit: Int) -> Bool {
            index.byteCount + fixedFileBytes + journal.snapshotBytes + journal.bytes > byteLimit
        }

        // MARK: The byte budget

        /// Under a byte limit, how long the journal may grow before a snapshot replaces it: 1/16 of
        /// the limit, between 512 bytes (a quarter of a smaller limit) and 64 KiB.
        static func journalAllowance(for byteLimit: Int) -> Int {
            min(max(byteLimit / 16, min(512, byteLimit / 4)), 1 << 16)
        }

        /// The bytes the entry files may take while the index holds `count` entries: the byte limit
        /// less what the container's own files may take meanwhile (the manifest and lock file, and
        /// the index: its snapshot with the journal at its longest, or a new snapshot of `count`
        /// entries, whichever is larger); `nil` without a byte limit.
        ///
        /// So every file of the container together stays within the byte limit once each section
        /// has ended (its journal folded into a snapshot when it grew past its allowance), and
        /// whenever `flush()` returns.
        func entryByteLimit(holding count: Int) -> Int? {
            guard let byteLimit = options.byteLimit else { return nil }
            guard options.limitsOwnFiles else { return byteLimit }
            let index = max(
                journal.snapshotBytes + Self.journalAllowance(for: byteLimit),
                DiskIndexFile.snapshotSize(records: count)
            )
            return max(0, byteLimit - fixedFileBytes - index)
        }

        /// Whether a flush writes a snapshot: the journal is long, or reads changed the eviction
        /// order (which only snapshots hold) as many times as the threshold.
        var snapshotIsStale: Bool { journalIsLong || accessesSinceSave >= indexSaveThreshold }

        // MARK: Peers

        /// The caches registered on the store, except `origin`.
        func observers(except origin: (any DiskStoreObserver)?) -> [any DiskStoreObserver] {
            // The common case, one cache alone on its container, allocates nothing.
            if observers.isEmpty || (origin != nil && observers.count == 1) { return [] }
            let originID = origin.map(ObjectIdentifier.init)
            return observers.compactMap { id, box in id == originID ? nil : box.observer }
        }
    }
}
