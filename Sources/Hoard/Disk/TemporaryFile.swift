import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The names of a store's temporary files, and when a temporary file left in a container may go.
///
/// A name is `.hoard-tmp-<pid>-<namespace>-<n>`: the writing process's id, the id of its process-id
/// namespace in hex (on Linux, the inode of `/proc/self/ns/pid`; 0 elsewhere), and a number unique
/// in the process. Releases before this one wrote `.hoard-tmp-<pid>-<n>`.
///
/// Several processes share a container, so a temporary file is only removed when its writer is
/// surely gone: its process id is in this process's namespace and `kill(pid, 0)` says no such
/// process (`ESRCH`), or the file is older than ``maximumAge``, far longer than any write takes.
/// A process id from another namespace (another container of a Linux host) means nothing here, so
/// such files wait for their age; so does a file whose process id was reused by a live process.
enum TemporaryFile {
    /// How old a temporary file must be to go whatever its name says: no write takes this long.
    static let maximumAge: Double = 15 * 60

    /// This process's process-id namespace, as it appears in temporary file names.
    static let namespace: UInt64 = {
        #if os(Linux)
        var status = stat()
        if stat("/proc/self/ns/pid", &status) == 0 { return UInt64(truncatingIfNeeded: status.st_ino) }
        #endif
        return 0
    }()

    /// Numbers temporary files; process-wide, so that two stores never pick the same name.
    private static let counter = Locked<UInt64>(0)

    /// A fresh name for a temporary file of this process.
    static func nextName() -> String {
        let number = counter.withLock { counter in
            counter &+= 1
            return counter
        }
        return "\(ContainerFile.temporaryPrefix)\(getpid())-\(String(namespace, radix: 16))-\(number)"
    }

    /// The writer of a temporary file, as its name gives it.
    struct Writer: Equatable {
        var pid: Int32
        /// `nil` for a name of an earlier release, which did not record it.
        var namespace: UInt64?
    }

    /// The writer named by `name`, or `nil` when `name` is not a temporary file's name of the usual form.
    static func writer(of name: String) -> Writer? {
        guard name.hasPrefix(ContainerFile.temporaryPrefix) else { return nil }
        let fields = name.dropFirst(ContainerFile.temporaryPrefix.count).split(separator: "-")
        guard let pid = fields.first.flatMap({ Int32($0) }), pid > 0 else { return nil }
        switch fields.count {
        case 2: return Writer(pid: pid, namespace: nil)
        case 3: return UInt64(fields[1], radix: 16).map { Writer(pid: pid, namespace: $0) }
        default: return nil
        }
    }

    /// Whether `name` is a temporary file of this process (its pid and namespace).
    static func isOurs(_ name: String) -> Bool {
        writer(of: name) == Writer(pid: getpid(), namespace: namespace)
    }

    /// Whether the temporary file `name`, last changed at `modified`, may be removed at `now`.
    ///
    /// - Parameters:
    ///   - name: The file's name.
    ///   - modified: When the file last changed, in seconds since 1970.
    ///   - now: Now, in seconds since 1970.
    ///   - isAlive: Whether a process id of this namespace names a live process; `kill(pid, 0)` by default.
    /// - Returns: Whether its writer is surely gone, or the file is too old to be a write in progress.
    static func isAbandoned(
        _ name: String,
        modified: Double,
        now: Double,
        isAlive: (Int32) -> Bool = processExists
    ) -> Bool {
        if now - modified > maximumAge { return true }
        // A name no release writes is no write in progress.
        guard let writer = writer(of: name) else { return true }
        if writer.pid == getpid() && writer.namespace.map({ $0 == namespace }) ?? true { return false }
        // An earlier release's name: most likely this namespace (one process per container then).
        guard writer.namespace.map({ $0 == namespace }) ?? true else { return false }
        return !isAlive(writer.pid)
    }

    /// Whether a process of this namespace has the id `pid`; `true` when in doubt.
    static func processExists(_ pid: Int32) -> Bool {
        kill(pid, 0) == 0 || errno != ESRCH
    }
}
