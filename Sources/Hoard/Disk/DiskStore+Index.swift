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
    func openIndex(log: inout DeferredLog) throws {
        var news = PeerNews()
        try withContainer(log: &log, news: &news) { log, isCurrent in
            guard isCurrent else {
                throw CacheError.io(
                    "Cannot list the container \(directory.path).",
                    underlying: POSIXFileError(operation: "opendir", path: directory.path, errorNumber: EACCES)
                )
            }
            sweepTemporaryFiles(log: &log)
            var victims: [DiskEntryIndex.Victim] = []
            withState { state in
                if let byteLimit = options.byteLimit {
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
                    byteLimit: options.byteLimit
                )
            }
            // Journaled first, like every change: a kill in between leaves an uncommitted section,
            // which the next reader checks against the files.
            journal(victims.map { .remove(digest: $0.key) }, log: &log)
            for victim in victims {
                log.add(
                    .debug,
                    "Evicted \"\(victim.payload.key.prefix(100))\" from disk to fit the count and byte limits."
                )
                removeFile(victim.key.hex, log: &log)
            }
        }
    }

    /// Removes the temporary files whose writers are gone (see ``TemporaryFile``); called inside a section.
    func sweepTemporaryFiles(log: inout DeferredLog) {
        let now = Date().timeIntervalSince1970
        do {
            for (name, modified) in try directory.temporaryFiles()
            where TemporaryFile.isAbandoned(name, modified: modified, now: now) {
                removeFile(name, log: &log)
            }
        } catch {
            log.add(.warning, "Cannot list the temporary files of \(directory.path): \(error)")
        }
    }

    /// Rebuilds the eviction order from the entry files, ordered by an index of an earlier release
    /// when there is one; called inside a section (or while opening).
    ///
    /// - Returns: The order, or `nil` when the folder cannot be listed.
    /// - Complexity: O(n), one listing, and one read per entry file the earlier index does not name
    ///   (every file when there is none).
    func rebuildIndex(log: inout DeferredLog) -> DiskEntryIndex? {
        var index = DiskEntryIndex(policy: options.policy, capacity: options.capacity)
        let listing: [(name: String, modified: Double, size: Int)]
        do {
            listing = try directory.list()
        } catch {
            log.add(.error, "Cannot list the container \(directory.path) to rebuild its index: \(error)")
            return nil
        }
        var unindexed: [String: Double] = [:]
        // The sizes of the files, not those an old index saved: it may be stale.
        var sizes: [String: Int] = [:]
        var hasIndexFile = false
        for (name, modified, size) in listing {
            if ContainerFile.isEntryName(name) {
                unindexed[name] = modified
                sizes[name] = size
            } else if name == ContainerFile.index {
                hasIndexFile = true
            }
        }
        let legacy =
            hasIndexFile
            ? (try? directory.read(ContainerFile.index))?.flatMap { bytes in
                bytes.withUnsafeBytes { DiskIndexFile.decodeSnapshot($0, version: DiskIndexFile.legacyVersion) }
            } : nil
        if let legacy {
            for record in legacy.records where unindexed.removeValue(forKey: record.digest.hex) != nil {
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
            log.add(.info, "Reading \(unindexed.count) entry file(s) of \(directory.path) missing from its index.")
        }
        let unindexedNames = unindexed.sorted(by: { ($0.value, $0.key) < ($1.value, $1.key) }).map(\.key)
        let half = unindexedNames.count / 2
        for names in [unindexedNames[..<half], unindexedNames[half...]] {
            if names.startIndex == half && !names.isEmpty { Self.testHooks.run(.rebuilding, at: directory.path) }
            for (name, entry) in zip(names, validEntries(named: names, log: &log)) {
                if let entry {
                    index.append(entry.info, forKey: entry.digest, count: 1)
                } else {
                    removeFile(name, log: &log)
                }
            }
        }
        return index
    }

    /// Reads files found in the container on every core (each read is a system call or two and a
    /// checksum; the order of `names` is kept); see ``validEntry(named:log:)``.
    private func validEntries(
        named names: ArraySlice<String>,
        log: inout DeferredLog
    ) -> [(digest: SHA256Digest, info: DiskEntryInfo)?] {
        let chunkSize = 256
        let chunks = (names.count + chunkSize - 1) / chunkSize
        let results = Locked<[Int: ([(digest: SHA256Digest, info: DiskEntryInfo)?], DeferredLog)]>([:])
        DispatchQueue.concurrentPerform(iterations: chunks) { chunk in
            var chunkLog = DeferredLog()
            let start = names.startIndex + chunk * chunkSize
            let read = names[start..<min(start + chunkSize, names.endIndex)].map { name in
                validEntry(named: name, log: &chunkLog)
            }
            results.withLock { $0[chunk] = (read, chunkLog) }
        }
        return results.withLock { results in
            (0..<chunks).flatMap { chunk -> [(digest: SHA256Digest, info: DiskEntryInfo)?] in
                guard let (read, chunkLog) = results[chunk] else { return [] }
                log.append(chunkLog)
                return read
            }
        }
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
