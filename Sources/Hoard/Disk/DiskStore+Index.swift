import Foundation

extension DiskStore {
    /// Catches up with what other processes journaled and writes the eviction order as a new
    /// snapshot when `always` or when it changed since the last one.
    ///
    /// Call it holding neither lock.
    /// - Complexity: O(n) when it writes a snapshot.
    func saveIndex(always: Bool = false, log: inout DeferredLog, news: inout PeerNews) {
        withContainer(log: &log, news: &news) { log, isCurrent in
            // A view that missed other processes' records must not replace theirs.
            guard isCurrent else { return }
            if always || withState({ $0.snapshotIsStale }) { compact(log: &log) }
        }
    }

    /// Loads the index while opening, before the store is shared: from the snapshot and journal when
    /// they are intact, otherwise from the entry files; sweeps abandoned temporary files and applies
    /// the count and byte limits.
    ///
    /// - Throws: ``CacheError`` with code `io` when there is no intact index and the container cannot
    ///   be listed.
    /// - Complexity: O(n) in the snapshot and journal, plus one listing that copies only temporary
    ///   files' names; with no intact index, one listing and one read per entry file.
    /// - Parameters:
    ///   - log: Where to log.
    ///   - news: What other processes changed, as the load learned of it: the caller tells the
    ///     store (``didTell(_:)``) once the caches heard of the marks it learned of (see
    ///     `finishOpening()`); until then, no fill of those keys lands.
    /// - Returns: Whether the writer must be started (to save the index), once the locks are
    ///   released: the reads made before the load, applied to the order before it evicts, called for it.
    @discardableResult
    func openIndex(log: inout DeferredLog, news: inout PeerNews) throws -> Bool {
        try withContainer(log: &log, news: &news) { log, isCurrent in
            guard isCurrent else { throw notCurrentError("Cannot open the container \(directory.path).") }
            sweepTemporaryFiles(log: &log)
            var victims: [DiskEntryIndex.Victim] = []
            let startsWriter = withState { state in
                // The reads served before the load count first: the eviction below must not take
                // what was just read (later reads, until the load ends, are applied after it).
                let startsWriter = state.applyEarlyAccesses()
                if let byteLimit = state.entryByteLimit(holding: 1) {
                    // An entry larger than the whole limit goes alone, not with every entry before it.
                    for entry in state.index.entriesInEvictionOrder where entry.payload.size > byteLimit {
                        state.index.removeValue(forKey: entry.key)
                        victims.append((entry.key, entry.payload, .cost))
                    }
                }
                victims += state.index.makeRoom(
                    forCount: 0,
                    bytes: 0,
                    capacity: options.capacity,
                    byteLimit: state.entryByteLimit(holding: state.index.count)
                )
                return startsWriter
            }
            removeEntryFiles(victims.map(\.key), evictedFor: " to fit the count and byte limits", log: &log)
            return startsWriter
        }
    }

    /// Removes the temporary files whose writers are gone (see ``TemporaryFile``); called inside a section.
    ///
    /// When the section rebuilt the index, the temporary files that the rebuild's listing found are
    /// looked at, and the folder is not listed again (a second pass over a large folder's names): a
    /// temporary file made since is its writer's, which is alive.
    func sweepTemporaryFiles(log: inout DeferredLog) {
        let now = Date().timeIntervalSince1970
        let listed = withState { state in
            defer { state.temporaryNamesListed = nil }
            return state.temporaryNamesListed
        }
        do {
            let files = try listed.map { directory.temporaryFiles(named: $0) } ?? directory.temporaryFiles()
            for (name, modified) in files where TemporaryFile.isAbandoned(name, modified: modified, now: now) {
                removeFile(name, log: &log)
            }
        } catch {
            log.add(.warning, "Cannot list the temporary files of \(directory.path): \(error)")
        }
    }

    /// Rebuilds the eviction order from the entry files, ordered by an index of an earlier release
    /// when there is one; called inside a section (or while opening).
    ///
    /// - Returns: The order, or the failed call when the folder cannot be listed.
    /// - Complexity: O(n), one listing, and one read per entry file the earlier index does not name
    ///   (every file when there is none).
    func rebuildIndex(log: inout DeferredLog) -> Result<DiskEntryIndex, CacheError.FileError> {
        var index = DiskEntryIndex(policy: options.policy, capacity: options.capacity)
        var unindexed: [SHA256Digest]
        let hasIndexFile: Bool
        // With no index file there is no earlier order to follow: the files are read on other
        // threads as the listing finds them (the listing is one thread's work, a fifth of a rebuild).
        var readsWhileListing: EntryReads?
        if case .success(nil) = directory.identity(of: ContainerFile.index) {
            readsWhileListing = EntryReads(directory: directory, schemaVersion: options.schemaVersion)
        }
        do throws(CacheError.FileError) {
            // Names only: each file's size and time come from its read (or, for the entries an
            // earlier index names, one `stat`), not from a `stat` of every name first. The entry
            // files' names are parsed into digests as they are listed.
            let listing = try directory.entryDigestsAndOtherNames(listed: readsWhileListing?.add)
            unindexed = listing.digests
            hasIndexFile = listing.others.contains(ContainerFile.index)
            // For this section's sweep, which then lists the folder no second time.
            let temporaryNames = listing.others.filter { $0.utf8.starts(with: ContainerFile.temporaryPrefix.utf8) }
            withState { $0.temporaryNamesListed = temporaryNames }
        } catch {
            // No read outlives the section.
            _ = readsWhileListing?.finish()
            log.add(.error, "Cannot list the container \(directory.path) to rebuild its index: \(error)")
            return .failure(error)
        }
        // An index file the listing found although none was there before cannot be this section's
        // (the section lock keeps every writer out): the one written after the rebuild replaces it.
        let legacy =
            hasIndexFile && readsWhileListing == nil
            ? (try? directory.read(ContainerFile.index))?.flatMap { bytes in
                bytes.withUnsafeBytes { DiskIndexFile.decodeSnapshot($0, version: DiskIndexFile.legacyVersion) }
            } : nil
        // Every name at most once: the listing's digests are distinct, so no append looks its key up.
        index.reserveCapacity(unindexed.count)
        if let legacy {
            var remaining = Set(unindexed)
            let named = legacy.records.filter { remaining.remove($0.digest) != nil }
            unindexed = unindexed.filter(remaining.contains)
            // The sizes of the files, not those the old index saved: it may be stale.
            let directory = self.directory
            let sizes = named.map(\.digest.hex).concurrentMap { directory.size(of: $0) }
            for (record, size) in zip(named, sizes) {
                guard let size else { continue }
                var info = record.info
                info.size = size
                index.appendNew(info, forKey: record.digest, count: record.count)
            }
        } else if hasIndexFile && readsWhileListing == nil {
            log.add(.warning, "The index of \(directory.path) is damaged; rebuilding it from the entry files.")
            // Whatever holds the name (an empty folder, say) would stop the index from being saved.
            removeFile(ContainerFile.index, log: &log)
        }
        if !unindexed.isEmpty {
            log.add(.info, "Reading \(unindexed.count) entry file(s) of \(directory.path) missing from its index.")
        }
        var found: [(digest: SHA256Digest, entry: EntryFileRead)] = []
        found.reserveCapacity(unindexed.count)
        if let readsWhileListing {
            if !unindexed.isEmpty { Self.testHooks.run(.rebuilding, at: directory.path) }
            let read = readsWhileListing.finish()
            precondition(read.count == unindexed.count, "rebuildIndex: one read per listed entry file")
            for (digest, (entry, entryLog)) in zip(unindexed, read) {
                log.append(entryLog)
                found.append((digest, entry))
            }
        } else {
            let half = unindexed.count / 2
            for digests in [unindexed[..<half], unindexed[half...]] {
                if digests.startIndex == half && !digests.isEmpty {
                    Self.testHooks.run(.rebuilding, at: directory.path)
                }
                found += zip(digests, validEntries(digests, log: &log)).map { ($0, $1) }
            }
        }
        var valid: [ValidEntry] = []
        valid.reserveCapacity(found.count)
        for (digest, read) in found {
            switch read {
            case .valid(let entry): valid.append(entry)
            case .damaged: removeFile(digest.hex, log: &log)
            // Left in place, out of the index: the next rebuild, or a write of its key, settles it.
            case .unreadable: break
            }
        }
        // Oldest first, as they were written: the order by modification time, then by name. A
        // digest's big-endian words order as its hex name does, and compare without a string (the
        // file system's clock ticks coarsely: many files share a time).
        valid.sort { a, b in
            (a.modified, a.digest.word0, a.digest.word1, a.digest.word2, a.digest.word3)
                < (b.modified, b.digest.word0, b.digest.word1, b.digest.word2, b.digest.word3)
        }
        // A listing names each file once: the section lock keeps every process from creating or
        // renaming entry files meanwhile. Should a name come twice anyway, its copies, equal in time
        // and digest, sort side by side, and only the first is appended.
        var previous: SHA256Digest?
        for entry in valid where entry.digest != previous {
            index.appendNew(entry.info, forKey: entry.digest, count: 1)
            previous = entry.digest
        }
        return .success(index)
    }

    /// An intact entry file found while rebuilding.
    private struct ValidEntry {
        var digest: SHA256Digest
        var info: DiskEntryInfo
        var modified: Double
    }

    /// What reading an entry file while rebuilding found.
    private enum EntryFileRead {
        /// An intact entry of its name's key.
        case valid(ValidEntry)
        /// Not an entry of this container (damaged, another key's, another schema's, a link, a
        /// folder) or gone: its name is removed.
        case damaged
        /// Not read for a reason that may pass (too many open files, no permission): left alone.
        case unreadable
    }

    /// Reads the entry files of `digests` on every core, in their order (each read is four system
    /// calls and a checksum, into a buffer each chunk reuses); see
    /// ``entryFileRead(_:in:schemaVersion:buffer:log:)``.
    private func validEntries(_ digests: ArraySlice<SHA256Digest>, log: inout DeferredLog) -> [EntryFileRead] {
        let (directory, schemaVersion) = (directory, options.schemaVersion)
        let read = digests.concurrentMapChunks { Self.readEntries($0, in: directory, schemaVersion: schemaVersion) }
        return read.map { entry, entryLog in
            log.append(entryLog)
            return entry
        }
    }

    /// Reads the entry files of `digests` one after another on the calling thread, into one buffer;
    /// each with what its read has to report.
    private static func readEntries(
        _ digests: ArraySlice<SHA256Digest>,
        in directory: Directory,
        schemaVersion: UInt32
    ) -> [(EntryFileRead, DeferredLog)] {
        let buffer = FileReadBuffer()
        return digests.map { digest in
            var entryLog = DeferredLog()
            let read = entryFileRead(
                digest,
                in: directory,
                schemaVersion: schemaVersion,
                buffer: buffer,
                log: &entryLog
            )
            return (read, entryLog)
        }
    }

    /// Reads of entry files that start while the folder is still being listed: each chunk of
    /// digests the listing finds (``add(_:)``) is read by one of at most one thread per core of the
    /// global queue, or by the listing thread in ``finish()``, whichever claims it first.
    ///
    /// The listing thread never waits for a chunk that no thread has claimed (it reads those
    /// itself), so the rebuild ends even when the global queue runs nothing meanwhile. Once
    /// ``finish()`` returns, no thread holds the directory: a rebuild may run from the store's
    /// `deinit`, and the folder (with the container's lock) must close with the store.
    private final class EntryReads: @unchecked Sendable {
        // Safe: `state` is a lock, and `claimed` and `workerLimit` are safe from any thread.
        private struct State {
            /// Where the files are, and the schema version an entry must have; `nil` once finished.
            var source: (directory: Directory, schemaVersion: UInt32)?
            /// Every chunk added, emptied once claimed.
            var chunks: [ArraySlice<SHA256Digest>] = []
            /// Each chunk's reads, once done.
            var reads: [[(EntryFileRead, DeferredLog)]?] = []
            /// The first chunk nobody has claimed.
            var next = 0
            /// The threads of the global queue that read chunks or are about to.
            var workers = 0
        }

        private let state: Locked<State>
        /// Entered for each claimed chunk, left once it is read.
        private let claimed = DispatchGroup()
        /// At most this many threads of the global queue read at once: reads block, and more
        /// threads would only hold more files open.
        private let workerLimit = max(1, ProcessInfo.processInfo.activeProcessorCount)

        init(directory: Directory, schemaVersion: UInt32) {
            state = Locked(State(source: (directory, schemaVersion)))
        }

        /// Adds the next chunk of digests, and starts a thread of the global queue to read it
        /// unless enough are at work.
        func add(_ digests: [SHA256Digest]) {
            let startsWorker = state.withLock { state in
                state.chunks.append(digests[...])
                state.reads.append(nil)
                guard state.workers < workerLimit else { return false }
                state.workers += 1
                return true
            }
            // Weakly: a thread that starts after the rebuild is over has nothing to read.
            if startsWorker { DispatchQueue.global().async { [weak self] in self?.work() } }
        }

        /// Reads chunks until none is left unclaimed.
        private func work() {
            while readNextChunk(asWorker: true) {}
        }

        /// Reads the first chunk nobody has claimed; `false` when there is none (a worker then
        /// counts itself out, in the same step).
        private func readNextChunk(asWorker: Bool) -> Bool {
            var source: (directory: Directory, schemaVersion: UInt32)?
            let next = state.withLock { state -> (Int, ArraySlice<SHA256Digest>)? in
                guard state.next < state.chunks.count, let current = state.source else {
                    if asWorker { state.workers -= 1 }
                    return nil
                }
                let index = state.next
                state.next += 1
                claimed.enter()
                source = current
                defer { state.chunks[index] = [] }
                return (index, state.chunks[index])
            }
            guard let (index, digests) = next else { return false }
            let done = DiskStore.readEntries(digests, in: source!.directory, schemaVersion: source!.schemaVersion)
            // Let go of the directory before ``finish()`` may return.
            source = nil
            state.withLock { $0.reads[index] = done }
            claimed.leave()
            return true
        }

        /// Reads every chunk nobody has claimed, waits for the others; every read, in the order of
        /// the chunks and of the digests in each.
        func finish() -> [(EntryFileRead, DeferredLog)] {
            while readNextChunk(asWorker: false) {}
            claimed.wait()
            return state.withLock { state in
                state.source = nil
                return state.reads.flatMap { $0 ?? [] }
            }
        }
    }

    /// Reads the file named by `digest`: its entry if it is intact and named by its key.
    ///
    /// The checks of a read through `EntryFormat.decode`, made over the bytes in `buffer`: the key
    /// and the payload are not copied out of them. A failed system call is damage only when the
    /// name holds no regular file (a link, a folder): any other (too many open files, no
    /// permission, an I/O error) may pass, and the file is left alone, as a disk hit leaves it.
    private static func entryFileRead(
        _ digest: SHA256Digest,
        in directory: Directory,
        schemaVersion: UInt32,
        buffer: FileReadBuffer,
        log: inout DeferredLog
    ) -> EntryFileRead {
        do {
            guard let (bytes, modified) = try directory.readEntryFile(digest, into: buffer) else { return .damaged }
            let entry = try EntryFormat.check(bytes)
            guard DiskKey.digest(ofKeyBytes: UnsafeRawBufferPointer(rebasing: bytes[entry.key])) == digest else {
                log.add(.warning, "Removed \(directory.path)/\(digest.hex): it holds another key's entry.")
                return .damaged
            }
            guard entry.schemaVersion == schemaVersion else {
                log.add(
                    .info,
                    "Removed \(directory.path)/\(digest.hex): written under schema version \(entry.schemaVersion)."
                )
                return .damaged
            }
            return .valid(
                ValidEntry(
                    digest: digest,
                    info: DiskEntryInfo(size: bytes.count, expiresAt: entry.expiresAt),
                    modified: modified
                )
            )
        } catch let error as CacheError.FileError where !isDamage(error) {
            log.add(.warning, "Cannot read the entry file \(directory.path)/\(digest.hex): \(error); left as it is.")
            return .unreadable
        } catch {
            log.add(.warning, "Removed the damaged entry file \(directory.path)/\(digest.hex): \(error).")
            return .damaged
        }
    }

    /// Whether a failed system call on an entry file says the name holds no entry (a link, a
    /// folder, a file too large for this platform), rather than that reading it failed this time.
    static func isDamage(_ error: CacheError.FileError) -> Bool {
        [ELOOP, EISDIR, EFBIG].contains(error.errorNumber)
    }
}
