#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension DiskStore {
    /// Checks the store against its folder and its limits; returns what is wrong, if anything.
    ///
    /// Runs in a section, once the store has caught up with what other stores and processes journaled,
    /// so no write is half done and the index is current. Every indexed entry without a pending operation
    /// must have a file of the indexed size; every entry file must be indexed or pending; no
    /// temporary file may remain; the byte count must be the sum of the sizes; and once nothing is
    /// pending, the count and byte limits must hold. For tests and debugging (see
    /// `Cache.validateInvariants()`).
    ///
    /// A container deleted from outside (its files gone on purpose, as when a test's temporary
    /// folder is removed before the cache is released) has nothing to check: the store makes the
    /// folder again on its next write.
    ///
    /// - Complexity: O(n), and one listing of the folder.
    func invariantViolations() -> [String] {
        withContainer { _ in
            guard !directory.isOpenFolderGone else { return [] }
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
        } ?? ["cannot read what other processes changed in the container"]
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
            total = total.addingReportingOverflow(entry.payload.size).partialValue
            guard pending[entry.key] == nil else { continue }
            let name = entry.key.hex
            if files[name] == nil {
                problems.append("indexed entry \(name) has no file")
            } else if files[name] != entry.payload.size {
                problems.append("entry \(name) is \(files[name] ?? 0) bytes, indexed as \(entry.payload.size)")
            }
        }
        if total != index.byteCount && total >= 0 { problems.append("byte count \(index.byteCount) ≠ sum \(total)") }
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

#if DEBUG
/// Checks, in debug builds, the only lock nesting disk stores allow: a state lock inside an I/O lock.
///
/// Each thread counts the disk-store locks it holds. Taking a state lock while holding one, or an
/// I/O lock while holding either kind (of any store), traps: the first would mean the state lock
/// is no longer a leaf, the second could deadlock (an I/O lock is not reentrant, and the writer
/// takes the state lock inside it). Release builds skip the counting.
enum DiskLockOrder {
    private static let stateLockKey = makeKey()
    private static let ioLockKey = makeKey()

    private static func makeKey() -> pthread_key_t {
        var key = pthread_key_t()
        let status = pthread_key_create(&key, nil)
        precondition(status == 0, "pthread_key_create failed: \(status)")
        return key
    }

    private static func isHeld(_ key: pthread_key_t) -> Bool { pthread_getspecific(key) != nil }

    private static func setHeld(_ key: pthread_key_t, _ isHeld: Bool) {
        pthread_setspecific(key, isHeld ? UnsafeRawPointer(bitPattern: 1) : nil)
    }

    static func willTakeStateLock() {
        precondition(
            !isHeld(stateLockKey),
            "A disk store's state lock was taken while holding one: nothing may be taken under a state lock."
        )
        setHeld(stateLockKey, true)
    }

    static func didReleaseStateLock() { setHeld(stateLockKey, false) }

    static func willTakeIOLock() {
        precondition(
            !isHeld(stateLockKey),
            "A disk store's I/O lock was taken while holding a state lock: the order is I/O lock, then state lock."
        )
        precondition(
            !isHeld(ioLockKey),
            "A disk store's I/O lock was taken while holding one: it is not reentrant, and no user code "
                + "(serializer, delegate) may run under it."
        )
        setHeld(ioLockKey, true)
    }

    static func didReleaseIOLock() { setHeld(ioLockKey, false) }
}
#endif
