import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension DiskStore {
    /// Returns what the store holds for `key`; a stored entry's read counts as an access unless
    /// `countsAccess` is false.
    ///
    /// A key the index does not hold is still looked for in its file: another process may have
    /// written it since this store last read the journal. A damaged, truncated or foreign file is
    /// removed, logged and reported as a miss.
    /// - Complexity: O(1) and one attempt to open the key's file.
    @usableFromInline
    func lookup(_ key: DiskKey, countsAccess: Bool = true) -> DiskLookup {
        let found = withState { state -> DiskLookup? in
            guard let operation = state.operationForReading(key.digest) else {
                // A file this store failed to remove holds a value that was replaced or removed.
                return state.unremovable.contains(key.digest) ? .miss : nil
            }
            if case .write(let value) = operation { return .pending(value) }
            return .miss
        }
        if let found { return found }

        switch readEntry(key) {
        case .success(let entry):
            guard countsAccess else { return .stored(entry) }
            switch withState({ $0.recordAccess(key.digest) }) {
            case .nothing: break
            case .startWriter: startWriter()
            case .keepOpenUntilLoaded:
                // The load is queued on the writer, holding the store weakly: this holds it until
                // the load has applied the access (and the closing store saves it).
                writer.async { withExtendedLifetime(self) {} }
            }
            return .stored(entry)
        case .failure(.missing):
            // Removed by another process, or never written: forget it if this store counted it.
            if withState({ $0.index.contains(key.digest) }) { repair(key) }
            return .miss
        case .failure:
            repair(key)
            return .miss
        }
    }

    /// Why an entry file cannot be used.
    enum ReadProblem: Error, CustomStringConvertible {
        case missing
        case unreadable(CacheError.FileError)
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

    /// Reads and decodes the entry file of `key`, holding no lock.
    func readEntry(_ key: DiskKey) -> Result<EntryFormat.Entry, ReadProblem> {
        do throws(CacheError.FileError) {
            // The closure captures no store: retaining one, which weak references point to, takes
            // its reference count's slow path.
            let schemaVersion = options.schemaVersion
            let read = try directory.withEntryFile(key.digest) { bytes in
                Self.decodeEntry(bytes, of: key, schemaVersion: schemaVersion)
            }
            return read ?? .failure(.missing)
        } catch {
            return .failure(.unreadable(error))
        }
    }

    /// Decodes the bytes of the entry file of `key` and checks that they hold that key under
    /// `schemaVersion`.
    private static func decodeEntry(
        _ bytes: UnsafeRawBufferPointer,
        of key: DiskKey,
        schemaVersion: UInt32
    ) -> Result<EntryFormat.Entry, ReadProblem> {
        let layout: EntryFormat.Layout
        do {
            layout = try EntryFormat.check(bytes)
        } catch {
            return .failure(.damaged(error))
        }
        let storedKey = UnsafeRawBufferPointer(rebasing: bytes[layout.key])
        // The stored key is most often the very bytes asked for, and then no string is made of it.
        // Otherwise it may still be the same key to Swift (another normalization of it, which names
        // the same file), as the memory level's dictionary would have it.
        let sameBytes = key.string.utf8.withContiguousStorageIfAvailable { asked in
            asked.count == storedKey.count
                && (asked.isEmpty || memcmp(asked.baseAddress!, storedKey.baseAddress!, asked.count) == 0)
        }
        let spelling: String
        if sameBytes == true {
            spelling = key.string
        } else {
            spelling = String(decoding: storedKey, as: UTF8.self)
            guard spelling == key.string else { return .failure(.foreignKey(spelling)) }
        }
        guard layout.schemaVersion == schemaVersion else {
            return .failure(.otherVersion(layout.schemaVersion))
        }
        let payload = UnsafeRawBufferPointer(rebasing: bytes[layout.payload])
        return .success(
            EntryFormat.Entry(
                key: spelling,
                payload: payload.isEmpty ? Data() : Data(bytes: payload.baseAddress!, count: payload.count),
                schemaVersion: layout.schemaVersion,
                expiresAt: layout.expiresAt
            )
        )
    }

    /// Removes the file of `key` if it is still unusable once the writer is out of the way.
    ///
    /// The file is read again under `ioLock`: the first read may have raced with the writer replacing
    /// it, and a transient failure (too many open files) is not damage. `ioLock` is only ever held
    /// for file operations, never for a serializer, so this waits for one write at most.
    private func repair(_ key: DiskKey) {
        settle(key) { log in
            let confirmed: ReadProblem
            switch readEntry(key) {
            case .success: return false
            case .failure(.unreadable(let error)) where !Self.isDamage(error):
                // A transient failure (too many open files, a permission problem): keep the file.
                log.add(.warning, "Cannot read the entry for key \"\(key.string.prefix(100))\": \(error)")
                return false
            case .failure(let problem): confirmed = problem
            }
            if case .missing = confirmed {
                // Another process removed it, and this one had not read the journal that says so.
                log.add(
                    .debug,
                    "The entry file \(directory.path)/\(key.fileName) for key \"\(key.string.prefix(100))\" vanished "
                        + "(another process may have removed it)."
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
    @usableFromInline @discardableResult
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
    /// - Returns: The keys removed, as their files stored them (a file whose key cannot be read is
    ///   removed, not listed).
    /// - Complexity: O(n) in the number of entries, plus one file read (of its key) and one removal
    ///   per expired entry; waits for a disk write in progress (never for a serializer).
    func removeExpired(now: Double) -> [String] {
        var messages = DeferredLog()
        defer { messages.flush() }
        let expired: [String?] =
            withContainer { log in
                let digests = withState { state in
                    state.index.entriesInEvictionOrder.compactMap { entry in
                        entry.payload.expiresAt.isExpired(at: now) && state.pending[entry.key] == nil ? entry.key : nil
                    }
                }
                // The keys come from the files, read before they go.
                let keys = removeEntryFiles(digests, log: &log)
                withState { state in
                    for digest in digests { state.forgetEntry(digest) }
                }
                return keys
            } ?? []
        if !expired.isEmpty { messages.add(.debug, "Removed \(expired.count) expired entries from \(directory.path).") }
        // An expired file whose key cannot be read (damaged, or gone) is removed without being reported.
        return expired.compactMap { $0 }
    }

    /// Runs `removesEntry` inside a section, unless a newer operation on `key` is pending or its entry
    /// is gone already; forgets the entry, and journals its removal for other processes, when
    /// `removesEntry` returns true.
    ///
    /// Logs after releasing the locks.
    @discardableResult
    private func settle(_ key: DiskKey, _ removesEntry: (inout DeferredLog) -> Bool) -> Bool {
        withContainer { log in
            // A newer operation, or a removal that already landed, explains whatever the caller saw.
            if withState({ $0.pending[key.digest] != nil || !$0.index.contains(key.digest) }) { return false }
            // Journaled before `removesEntry` may unlink; if it keeps the file after all, the section
            // puts the entry back (or, killed, is checked against the files by the next reader).
            journal([.remove(digest: key.digest, key: key.string)], log: &log)
            guard removesEntry(&log) else {
                if let info = withState({ $0.index.peek(key.digest) }) {
                    journal(
                        [.put(digest: key.digest, size: info.size, expiresAt: info.expiresAt, key: key.string)],
                        log: &log
                    )
                }
                return false
            }
            withState { $0.forgetEntry(key.digest) }
            return true
        } ?? false
    }
}
