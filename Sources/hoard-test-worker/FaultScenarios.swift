import Foundation
import Hoard

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

#if canImport(Glibc)
private let openFileLimit = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
#else
private let openFileLimit = RLIMIT_NOFILE
#endif

/// File-system faults that need a process of their own: an unprivileged user (root ignores
/// permissions) or a lowered open-file limit (which would starve the test process).
///
/// Prints `ok <check>` or `fail <check>: <detail>` per check and `done` at the end; the test fails
/// on any `fail` line or a missing `done`.
struct FaultScenarios {
    let folder: String

    init(arguments: [String]) {
        folder = argument(arguments, 0)
        FailureLog.install()
    }

    /// A read-only container, then an unreadable one, then the fault cleared.
    func permissions() async throws {
        let path = folder + "/perm"
        let delegate = FailureRecorder()
        var cache: Cache<String>? = try stringCache(folder: folder, container: "perm", delegate: delegate)
        cache?["kept"] = "old"
        cache?["other"] = "untouched"
        await cache?.flush()
        check("a writable container stores values", delegate.failures.isEmpty, "\(delegate.failures)")

        // Read-only: writes fail, are reported, and memory keeps serving.
        chmod(path, 0o500)
        cache?["new"] = "fresh"
        cache?["kept"] = "newer"
        await cache?.flush()
        check(
            "writes to a read-only container are reported to the delegate",
            Set(delegate.failures) == ["new", "kept"],
            "failures: \(delegate.failures)"
        )
        check(
            "writes to a read-only container are logged",
            FailureLog.contains("Cannot write the entry for key \"new\""),
            "log: \(FailureLog.messages.suffix(3))"
        )
        check("memory keeps serving while the container is read-only", cache?["new"] == "fresh", "")
        check("memory serves the newest value", cache?["kept"] == "newer", "")
        cache?.clearMemory()
        check("an untouched entry is still read from disk", cache?["other"] == "untouched", "")
        check(
            "a value whose overwrite failed is not served stale",
            cache?["kept"] == nil,
            "got \(cache?["kept"] ?? "nil")"
        )
        check("no temporary file is left", temporaryFiles(in: path).isEmpty, "\(temporaryFiles(in: path))")

        // Unreadable: reads miss without removing anything; memory keeps serving.
        chmod(path, 0o000)
        cache?["inMemory"] = "served"
        await cache?.flush()
        check("memory keeps serving while the container is unreadable", cache?["inMemory"] == "served", "")
        cache?.clearMemory()
        check("an unreadable entry is a miss", cache?["other"] == nil, "")
        do {
            // A folder this process never opened: a container it had open may still be held by its
            // writer for a moment after the cache is released, and would then be shared, not opened.
            mkdir(folder + "/closed", 0o000)
            _ = try stringCache(folder: folder, container: "closed")
            check("opening an unreadable container fails", false, "build() succeeded")
        } catch let error as CacheError {
            check("opening an unreadable container throws an I/O error", error.code == .io, "\(error)")
        }

        // The fault clears: everything works again, and nothing was lost or damaged.
        chmod(path, 0o700)
        check("an entry survives an unreadable spell", cache?["other"] == "untouched", "")
        delegate.reset()
        cache?["new"] = "fresh again"
        cache?["kept"] = "newest"
        await cache?.flush()
        check("writes work once the container is writable", delegate.failures.isEmpty, "\(delegate.failures)")
        cache = nil
        let reopened = try stringCache(folder: folder, container: "perm")
        check("a reopened cache reads what was written after the fault", reopened["new"] == "fresh again", "")
        check("a reopened cache reads the newest value", reopened["kept"] == "newest", "\(reopened["kept"] ?? "nil")")
        check("a reopened cache reads the untouched entry", reopened["other"] == "untouched", "")
        check("no temporary file is left after reopening", temporaryFiles(in: path).isEmpty, "")
        emit("done")
    }

    /// Too many open files: the descriptors run out, then come back.
    func descriptors() async throws {
        let path = folder + "/fds"
        let delegate = FailureRecorder()
        let cache = try stringCache(folder: folder, container: "fds", delegate: delegate)
        for index in 0..<10 { cache["k\(index)"] = "value \(index)" }
        await cache.flush()
        cache.clearMemory()

        // Take every descriptor the limit allows.
        var limit = rlimit()
        getrlimit(openFileLimit, &limit)
        var lowered = limit
        lowered.rlim_cur = 256
        setrlimit(openFileLimit, &lowered)
        var taken: [Int32] = []
        while true {
            let descriptor = dup(1)
            if descriptor < 0 { break }
            taken.append(descriptor)
        }
        check("the descriptors ran out", errno == EMFILE, "errno \(errno)")

        cache["new"] = "in memory"
        await cache.flush()
        let starved = cache["k3"]
        let failures = delegate.failures
        let loggedRead = FailureLog.contains("Cannot read the entry for key \"k3\"")

        for descriptor in taken { close(descriptor) }
        setrlimit(openFileLimit, &limit)

        check("a write without descriptors is reported", failures == ["new"], "failures: \(failures)")
        check("memory keeps serving without descriptors", cache["new"] == "in memory", "")
        check("a read without descriptors is a miss", starved == nil, "got \(starved ?? "nil")")
        check("a read without descriptors is logged", loggedRead, "log: \(FailureLog.messages.suffix(3))")
        check("the entry is kept through the shortage", cache["k3"] == "value 3", "got \(cache["k3"] ?? "nil")")
        delegate.reset()
        cache["new"] = "on disk"
        await cache.flush()
        check("writes work once descriptors are back", delegate.failures.isEmpty, "\(delegate.failures)")
        cache.clearMemory()
        check("the new value is on disk", cache["new"] == "on disk", "")
        for index in 0..<10 where cache["k\(index)"] != "value \(index)" {
            check("entry k\(index) is intact", false, "got \(cache["k\(index)"] ?? "nil")")
        }
        check("no temporary file is left", temporaryFiles(in: path).isEmpty, "\(temporaryFiles(in: path))")
        emit("done")
    }

    /// Opens a container this process cannot write, sets a key, and prints the error the delegate
    /// heard: `message <message>`, then `underlying <operation> <errno> <path>` when it carries a
    /// ``CacheError/FileError`` (else `underlying none <type>`), then `done`.
    func readOnlyStoreError(_ arguments: [String]) async throws {
        let delegate = FailureRecorder()
        let cache = try stringCache(folder: folder, container: argument(arguments, 1), delegate: delegate)
        cache["k2"] = "new"
        await cache.flush()
        guard let error = delegate.errors.first as? CacheError else {
            emit("fail no CacheError reported: \(delegate.errors)")
            return
        }
        emit("message \(error.message)")
        if let posix = error.underlyingError as? CacheError.FileError {
            emit("underlying \(posix.operation) \(posix.errorNumber) \(posix.path)")
        } else {
            emit("underlying none \(error.underlyingError.map { "\(type(of: $0))" } ?? "nil")")
        }
        emit("done")
    }

    private func check(_ name: String, _ condition: Bool, _ detail: @autoclosure () -> String) {
        emit(condition ? "ok \(name)" : "fail \(name): \(detail())")
    }

    private func temporaryFiles(in path: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).filter { $0.hasPrefix(".hoard-tmp-") }
    }
}

/// Records the keys whose values could not be stored.
final class FailureRecorder: CacheDelegate, @unchecked Sendable {
    // Safe because `keys` is only touched while holding `lock`.
    private let lock = NSLock()
    private var keys: [String] = []
    private var reported: [any Error] = []

    var failures: [String] { lock.withLock { keys } }

    /// The errors reported, in order.
    var errors: [any Error] { lock.withLock { reported } }

    func reset() {
        lock.withLock {
            keys.removeAll()
            reported.removeAll()
        }
    }

    func cache(_ cache: Cache<String>, didFailToStoreValueForKey key: String, error: any Error) {
        lock.withLock {
            keys.append(key)
            reported.append(error)
        }
    }
}

/// What Hoard logs in this process.
enum FailureLog {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var stored: [String] = []
    // Safe because `stored` is only touched while holding `lock`.

    static func install() {
        HoardLogger.output = { message, _ in lock.withLock { stored.append(message) } }
    }

    static var messages: [String] { lock.withLock { stored } }

    static func contains(_ text: String) -> Bool { messages.contains { $0.contains(text) } }
}
