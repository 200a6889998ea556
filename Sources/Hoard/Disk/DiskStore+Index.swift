extension DiskStore {
    /// Saves the eviction order to the index file.
    ///
    /// The order is copied holding the state lock, encoded holding no lock, and written holding
    /// `ioLock`, unless a later copy was written meanwhile. Call it holding neither lock.
    /// - Complexity: O(n).
    func saveIndex(log: inout DeferredLog) {
        let snapshot = withState { $0.takeIndexSnapshot() }
        let bytes = DiskIndexFile.encode(snapshot.records)
        withIOLock {
            guard withState({ $0.claimIndexWrite(snapshot.number) }) else { return }
            do {
                try directory.writeAtomically(bytes, to: ContainerFile.index, through: nextTemporaryName())
            } catch {
                log.add(.warning, "Cannot save the index of \(directory.path): \(error)")
            }
        }
    }

    /// Lists the container, sweeps temporary files, and rebuilds the eviction order from the saved
    /// index and the entry files; called while opening, before the store is shared.
    ///
    /// - Returns: The eviction order, and the changes it holds that the saved index lacks.
    /// - Complexity: O(n), one listing, and one read per entry file the saved index does not name.
    func loadIndex(log: inout DeferredLog) throws -> (index: DiskEntryIndex, changesSinceSave: Int) {
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
        let unindexedNames = unindexed.sorted(by: { ($0.value, $0.key) < ($1.value, $1.key) }).map(\.key)
        for (position, name) in unindexedNames.enumerated() {
            if position == unindexedNames.count / 2 { Self.testHooks.run(.rebuilding, at: directory.path) }
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
        return (index, saved == nil || !unindexed.isEmpty || !victims.isEmpty ? 1 : 0)
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
