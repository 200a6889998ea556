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
        withIOLock {
            let files: [String: Int]
            do {
                files = Dictionary(
                    try directory.list().map { ($0.name, $0.size) },
                    uniquingKeysWith: { first, _ in first }
                )
            } catch {
                return ["cannot list the container: \(error)"]
            }
            return withState { $0.violations(files: files) }
        }
    }
}

extension DiskStore.State {
    /// What is wrong with the state, given the container's files and their sizes.
    ///
    /// - Complexity: O(n).
    func violations(files: [String: Int]) -> [String] {
        var problems: [String] = []
        index.checkInvariants()
        var total = 0
        for entry in index.entriesInEvictionOrder {
            total += entry.payload.size
            guard pending[entry.key] == nil else { continue }
            let name = entry.key.hex
            if files[name] == nil {
                problems.append("indexed entry \(name) (\"\(entry.payload.key.prefix(40))\") has no file")
            } else if files[name] != entry.payload.size {
                problems.append("entry \(name) is \(files[name] ?? 0) bytes, indexed as \(entry.payload.size)")
            }
        }
        if total != index.byteCount { problems.append("byte count \(index.byteCount) ≠ sum \(total)") }
        for name in files.keys {
            if name.hasPrefix(ContainerFile.temporaryPrefix) { problems.append("temporary file \(name) left") }
            if ContainerFile.isEntryName(name), let digest = SHA256Digest(hex: name), !index.contains(digest),
                pending[digest] == nil
            {
                problems.append("entry file \(name) is not indexed")
            }
        }
        if pending.isEmpty {
            if index.count > options.capacity { problems.append("\(index.count) entries > capacity") }
            if let byteLimit = options.byteLimit, index.byteCount > byteLimit {
                problems.append("\(index.byteCount) bytes > byte limit \(byteLimit)")
            }
        }
        return problems
    }
}
