import Foundation

extension DiskStore {
    /// Queues a write of `value` for `key`; readers see it at once, the file lands in the background.
    ///
    /// Writes and removals of one key apply in the order they were queued; the writer only writes the
    /// latest one.
    /// - Returns: The news that `key` changed, for the other caches on the container: the caller
    ///   delivers it once its locks are released.
    func enqueueWrite(
        _ key: DiskKey,
        value: PendingValue,
        observer: (any DiskStoreObserver)?
    ) -> PeerNews {
        enqueue(key, .write(value), observer: observer, completion: nil)
    }

    /// Queues a write of `value` for `key`, and tells `completion` once it is in its file.
    ///
    /// `completion` is called once, outside every lock, from the background writer: with success
    /// when the value landed, or when a later change of the key (a set, a removal, a clear) replaced
    /// it first; with the error when it could not be serialized or written, or its entry is larger
    /// than the byte limit.
    /// - Returns: The news that `key` changed, for the other caches on the container.
    func enqueueWrite(
        _ key: DiskKey,
        value: PendingValue,
        observer: (any DiskStoreObserver)?,
        completion: @escaping Completion
    ) -> PeerNews {
        enqueue(key, .write(value), observer: observer, completion: completion)
    }

    /// Queues a removal of `key`; readers miss it at once, the file goes in the background.
    ///
    /// - Returns: The news that `key` changed, for the other caches on the container.
    @usableFromInline
    func enqueueRemove(_ key: DiskKey, observer: (any DiskStoreObserver)?) -> PeerNews {
        enqueue(key, .remove, observer: observer, completion: nil)
    }

    /// Whether a write or removal of `key` is queued or under way.
    func hasPendingOperation(_ key: DiskKey) -> Bool {
        withState { $0.pending[key.digest] != nil }
    }

    private func enqueue(
        _ key: DiskKey,
        _ operation: Operation,
        observer: (any DiskStoreObserver)?,
        completion: Completion?
    ) -> PeerNews {
        let enqueued = withState { $0.enqueue(key, operation, observer: observer, completion: completion) }
        if enqueued.startsWriter { startWriter() }
        return .changed(key.string, for: enqueued.peers)  // and `enqueued.replaced` is released here, outside the lock
    }

    /// Waits until every write and removal queued before the call is on disk, and the index is saved.
    func flush() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            if withState({ $0.enqueueFlush(continuation) }) { startWriter() }
        }
    }

    /// Removes every entry file, pending write and abandoned temporary file, and journals the clear
    /// for other processes; waits for a file operation in progress (never for a serializer: the
    /// writer runs those before it takes `ioLock`).
    ///
    /// Temporary files of other live processes stay: they may be writes in progress.
    /// - Complexity: O(n) file removals.
    func removeAll() {
        var messages = DeferredLog()
        var news = PeerNews()
        defer {
            messages.flush()
            news.deliver(toEveryCacheOf: self)
        }
        let now = Date().timeIntervalSince1970
        let dropped = withContainer(log: &messages, news: &news) { log, _ in
            let dropped = withState { $0.removeAll() }
            // Journaled first: a process killed while removing leaves an uncommitted clear, which
            // makes the next reader rebuild from the files that are left.
            journal([.clear], log: &log)
            do {
                for (name, modified, _) in try directory.list()
                where ContainerFile.isEntryName(name)
                    || (name.hasPrefix(ContainerFile.temporaryPrefix)
                        && (TemporaryFile.isOurs(name) || TemporaryFile.isAbandoned(name, modified: modified, now: now)))
                {
                    removeFile(name, log: &log)
                }
            } catch {
                log.add(.error, "Cannot list the container \(directory.path) to clear it: \(error)")
            }
            compact(log: &log)
            return dropped
        }
        // The values of the dropped writes are released here, unlocked; a save waiting on one is
        // answered: the clear replaced it. So is one the writer has taken already (its serializer may
        // run long): the writer's own answer once it sees the clear comes second, and is ignored
        // (each completion answers once; see `DiskStore.once`).
        for pending in dropped.values {
            for completion in pending.completions { completion(.success(())) }
        }
    }

    /// Runs the writer on its queue; call it when the state said the writer was idle.
    func startWriter() {
        writer.async { self.drain() }
    }

    /// What the writer must do once it has released `ioLock`: tell caches.
    enum Effect {
        case evicted(key: String, reason: EvictionReason, observer: (any DiskStoreObserver)?)
        case failed(key: String, error: CacheError, observer: (any DiskStoreObserver)?)
    }

    /// The background writer's loop: applies queued items in order until the queue is empty.
    ///
    /// Each operation is prepared (serialized and encoded) holding no lock, then applied holding
    /// `ioLock`; what it must report (evictions, failures, log messages) is reported after `ioLock` is
    /// released, so a serializer or a delegate may call anything on the cache.
    private func drain() {
        while true {
            var messages = DeferredLog()
            var news = PeerNews()
            switch withState({ $0.takeNext() }) {
            case .idle(let savesIndex):
                if savesIndex { saveIndex(log: &messages, news: &news) }
                messages.flush()
                news.deliver(toEveryCacheOf: self)
                return
            case .flush(let continuation):
                saveIndex(log: &messages, news: &news)
                messages.flush()
                news.deliver(toEveryCacheOf: self)
                continuation.resume()
            case .apply(let first):
                // Up to a batch of the operations queued next land in one section: one lock and one
                // look at the journal for all of them.
                var batch = [first]
                while batch.count < Self.writesPerSection, let next = withState({ $0.takeNextWrite() }) {
                    batch.append(next)
                }
                let outcomes = write(batch, log: &messages, news: &news)
                messages.flush()
                news.deliver(toEveryCacheOf: self)
                for (pending, (effects, result)) in zip(batch, outcomes) {
                    for completion in pending.completions { completion(result) }
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
    }

    /// The most queued operations the writer applies in one section.
    static let writesPerSection = 64

    /// An operation made ready outside every lock.
    private enum Prepared {
        case remove
        case write([UInt8], DiskEntryInfo)
        /// Larger than the whole byte limit: not kept, and an older value must not be served.
        case oversized(size: Int, byteLimit: Int)
        case failed(CacheError)
    }

    /// Writes a batch of pending operations: serializes them holding no lock, then, in one section,
    /// changes the files of each unless a clear dropped it meanwhile.
    ///
    /// - Returns: For each operation, what to report once the locks are released, and whether its
    ///   bytes landed (for a save waiting on it).
    private func write(
        _ batch: [Pending],
        log: inout DeferredLog,
        news: inout PeerNews
    ) -> [([Effect], Result<Void, CacheError>)] {
        // User code (the serializer) runs here, before `ioLock`: it may call back into its cache.
        let prepared = batch.map(prepare)
        return withContainer(log: &log, news: &news) { log, isCurrent in
            guard isCurrent else {
                // Changing files from a view that may miss other processes' changes could undo
                // theirs: every operation fails, and changes nothing. One a clear dropped meanwhile
                // does not fail: the clear answered it, as `land` does.
                return batch.map { pending in
                    if withState({ $0.isCleared(pending) }) { return ([], .success(())) }
                    let error = notCurrentError(
                        "The change for key \"\(pending.key.string.prefix(100))\" is not made:",
                        key: pending.key.string
                    )
                    withState { $0.didNotApply(pending) }
                    return ([reportFailure(error, of: pending, log: &log)], .failure(error))
                }
            }
            return zip(batch, prepared).map { pending, prepared in land(pending, prepared, log: &log) }
        }
    }

    /// Serializes and encodes one operation; runs the user's serializer, so holds no lock.
    private func prepare(_ pending: Pending) -> Prepared {
        let key = pending.key
        switch pending.operation {
        case .remove:
            return .remove
        case .write(let value):
            do {
                let bytes = try encode(value, for: key)
                // The entry must fit beside the container's own files (its index, its manifest).
                if let byteLimit = options.byteLimit, let room = withState({ $0.entryByteLimit(holding: 1) }),
                    bytes.count > room
                {
                    return .oversized(size: bytes.count, byteLimit: byteLimit)
                }
                return .write(bytes, DiskEntryInfo(size: bytes.count, expiresAt: value.expiresAt))
            } catch {
                return .failed(error)
            }
        }
    }

    /// Changes the files for one prepared operation; called inside a section.
    private func land(
        _ pending: Pending,
        _ prepared: Prepared,
        log: inout DeferredLog
    ) -> ([Effect], Result<Void, CacheError>) {
        let key = pending.key
        // A clear that ran while the value was being serialized dropped it: no write lands after
        // a clear that followed it. The clear answered it as replaced, so a serializer that failed
        // meanwhile is only logged: its cache does not hear of a failed store its caller was told
        // did not happen, nor would it had the clear come before the writer took the write. A
        // newer operation on the key is queued behind this one and lands next.
        guard !withState({ $0.isCleared(pending) }) else {
            if case .failed(let error) = prepared {
                log.add(.info, "A value a clear dropped could not be written either: \(error.message)")
            }
            return ([], .success(()))
        }
        // A fill that read its key before another process changed it or cleared the container
        // (caught up with in this section or an earlier one) would put the older value back over
        // that change: it does not land. The file that process left (its confirmed save, say)
        // stays, unless the fill replaced a removal of this process's that was never made (an
        // invalidation that made that file stale, say): the removal is made then. A missing file
        // is never wrong: the next read asks the shared level or the fetcher again.
        if withState({ $0.isOutdatedFill(pending) }) {
            let removes = pending.replacesRemoval
            log.add(
                .debug,
                "Did not write the value read for key \"\(key.string.prefix(100))\": another process "
                    + "changed the key or cleared the container since it was read"
                    + (removes ? "; its file is removed, as a removal the value replaced." : ".")
            )
            if removes {
                removeEntryFile(of: pending, log: &log)
            } else {
                withState { $0.didDrop(pending) }
            }
            return ([], .success(()))
        }
        switch prepared {
        case .remove:
            removeEntryFile(of: pending, log: &log)
            return ([], .success(()))
        case .oversized(let size, let byteLimit):
            // Not kept, and not written: an older value of the key must not be served either.
            removeEntryFile(of: pending, log: &log)
            log.add(
                .info,
                "Did not keep the value for key \"\(key.string.prefix(100))\" on disk: its entry "
                    + "(\(size) bytes) is larger than the byte limit (\(byteLimit) bytes)."
            )
            let tooLarge = CacheError.valueTooLarge(key: key.string, size: size, byteLimit: byteLimit)
            return ([.evicted(key: key.string, reason: .cost, observer: pending.observer)], .failure(tooLarge))
        case .write(let bytes, let info):
            // Journaled before the rename, like every change: a kill between the two leaves an
            // uncommitted section, which the next reader checks against the files.
            let record = DiskJournal.Record.put(
                digest: key.digest,
                size: info.size,
                expiresAt: info.expiresAt,
                key: key.string
            )
            if case .failure(let failure) = journal([record], log: &log) {
                // Not journaled, so not renamed in: a file no index counts would never be evicted.
                let error = CacheError.io(
                    "Cannot write the entry for key \"\(key.string.prefix(100))\": the journal of "
                        + "\(directory.path) cannot be appended to:",
                    key: key.string,
                    underlying: failure
                )
                return (didFail(pending, error: error, log: &log), .failure(error))
            }
            do throws(CacheError) {
                try write(bytes, for: key)
            } catch {
                return (didFail(pending, error: error, log: &log), .failure(error))
            }
            let victims = withState { $0.didWriteFile(of: pending, info: info) }
            // The victims are out of the index: readers miss them already. Their removals are
            // journaled, then their files go; the delegate hears "will evict" right after, once
            // `ioLock` is released.
            let keys = removeEntryFiles(victims.map(\.key), evictedFor: " (\(options.policy))", log: &log)
            // A victim whose file was gone or damaged has no key to report: nobody could read it.
            let evictions = zip(victims, keys).compactMap { victim, key in
                key.map { Effect.evicted(key: $0, reason: victim.reason, observer: pending.observer) }
            }
            return (evictions, .success(()))
        case .failed(let error):
            return (didFail(pending, error: error, log: &log), .failure(error))
        }
    }

    /// Handles a value that could not be encoded or written; called inside a section.
    private func didFail(_ pending: Pending, error: CacheError, log: inout DeferredLog) -> [Effect] {
        // The old file holds an older value than the one that failed: it must not be served.
        removeEntryFile(of: pending, log: &log)
        return [reportFailure(error, of: pending, log: &log)]
    }

    /// Removes the entry file of `pending`'s key, forgets it, and journals the removal; called inside
    /// a section.
    private func removeEntryFile(of pending: Pending, log: inout DeferredLog) {
        // Journaled first, unconditionally (another process may count the key even if this one has
        // not heard of it): a kill before the unlink leaves an uncommitted section, checked by the
        // next reader against the files.
        var records: [DiskJournal.Record] = [.remove(digest: pending.key.digest, key: pending.key.string)]
        // A value refused here that goes to the shared level: until its write there is made, the
        // level holds the value this removal makes stale, which other processes must not fill.
        if case .write(let value) = pending.operation, value.isBoundForShared {
            records.insert(sharedMark(of: pending.key.string), at: 0)
        }
        journal(records, log: &log)
        removeFile(pending.key.fileName, log: &log)
        withState { $0.didRemoveFile(of: pending) }
    }

    /// Logs a failed write; returns the effect that tells the cache that queued it.
    private func reportFailure(_ error: CacheError, of pending: Pending, log: inout DeferredLog) -> Effect {
        // An I/O error's message names its cause (no space left, permission denied) and path.
        log.add(.warning, error.message)
        return .failed(key: pending.key.string, error: error, observer: pending.observer)
    }

    /// Serializes a value and encodes its entry file; runs the user's serializer, so holds no lock.
    private func encode(_ value: PendingValue, for key: DiskKey) throws(CacheError) -> [UInt8] {
        let payload: Data
        LockOrder.assertNoneHeld("calling the serializer")
        do {
            payload = try value.serialize()
        } catch {
            throw CacheError.serializationFailed(key: key.string, underlying: error)
        }
        guard payload.count <= EntryFormat.maximumFieldSize, key.string.utf8.count <= EntryFormat.maximumFieldSize
        else {
            throw CacheError.io(
                "The value for key \"\(key.string.prefix(100))\" is too large for one entry file: its payload "
                    + "(\(payload.count) bytes) and its key (\(key.string.utf8.count) bytes) must each fit in "
                    + "\(EntryFormat.maximumFieldSize) bytes.",
                key: key.string
            )
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

    /// A fresh name for a temporary file of this process.
    func nextTemporaryName() -> String { TemporaryFile.nextName() }
}
