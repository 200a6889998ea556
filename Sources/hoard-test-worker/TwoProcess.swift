import Foundation
import Hoard

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

/// The child's side of the two-process tests.
enum TwoProcess {
    /// Opens the container (for this process alone with a third argument `exclusive`), stores
    /// `held` = `by the child`, flushes, prints `ready`, then keeps the container open until standard
    /// input ends (or the process is killed).
    ///
    /// Prints `inUse` and exits with status 3 when another process has the container open exclusively.
    static func hold(arguments: [String]) async throws {
        let cache: Cache<String>
        do {
            cache = try stringCache(
                folder: argument(arguments, 0),
                container: argument(arguments, 1),
                exclusive: arguments.count > 2 && arguments[2] == "exclusive"
            )
        } catch CacheError.containerInUse {
            emit("inUse")
            exit(3)
        }
        cache["held"] = "by the child"
        await cache.flush()
        emit("ready")
        var byte: UInt8 = 0
        while read(0, &byte, 1) > 0 {}
        withExtendedLifetime(cache) {}
        emit("released")
    }

    /// Locks the whole lock file of the container at `<folder>/<container>` for writing, as releases
    /// before shared containers did for a cache's whole life; prints `ready` (or `failed <errno>`,
    /// exit status 5), then holds it until standard input ends.
    static func holdAsEarlierRelease(arguments: [String]) throws {
        let path = "\(argument(arguments, 0))/\(argument(arguments, 1))/.hoard-lock"
        let file = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        var request = flock()
        request.l_type = Int16(F_WRLCK)
        request.l_whence = Int16(SEEK_SET)
        request.l_start = 0
        request.l_len = 0
        guard file >= 0, fcntl(file, F_SETLK, &request) == 0 else {
            emit("failed \(errno)")
            exit(5)
        }
        emit("ready")
        var byte: UInt8 = 0
        while read(0, &byte, 1) > 0 {}
        close(file)
    }

    /// Opens the container as a cache of `Data` values: prints `opened <entry count>`, or
    /// `invalid <message>` and exits with status 4 when the container holds another type.
    static func openAsData(arguments: [String]) async throws {
        do {
            let cache = try CacheBuilder<Data>(serializer: DataSerializer())
                .containerName(argument(arguments, 1))
                .directory(URL(fileURLWithPath: argument(arguments, 0), isDirectory: true))
                .build()
            emit("opened \(cache.diskCount)")
        } catch let error as CacheError where error.code == .invalidConfiguration {
            emit("invalid \(error.message)")
            exit(4)
        }
    }

    /// Tries to open the container: prints `inUse` (exit status 3), or `opened <value of key parent>`,
    /// then stores `child` = `written by the child` and flushes.
    static func tryOpen(arguments: [String]) async throws {
        let cache: Cache<String>
        do {
            cache = try stringCache(
                folder: argument(arguments, 0),
                container: argument(arguments, 1),
                exclusive: arguments.count > 2 && arguments[2] == "exclusive"
            )
        } catch let error as CacheError where error.code == .containerInUse {
            emit("inUse \(error.message)")
            exit(3)
        }
        emit("opened \(cache["parent"] ?? "nil")")
        cache["child"] = "written by the child"
        await cache.flush()
        emit("flushed")
    }

    /// Sets each `<key> <value>` pair of the arguments after the container (a value `-` removes the
    /// key), flushes, and prints `flushed`.
    static func write(arguments: [String]) async throws {
        let cache = try stringCache(folder: argument(arguments, 0), container: argument(arguments, 1))
        var pairs = arguments.dropFirst(2)
        while let key = pairs.popFirst() {
            let value = argument(Array(pairs), 0)
            pairs = pairs.dropFirst()
            cache[key] = value == "-" ? nil : value
        }
        await cache.flush()
        emit("flushed")
    }

    /// Clears the container with `removeAll()`, flushes, and prints `cleared`.
    static func clear(arguments: [String]) async throws {
        let cache = try stringCache(folder: argument(arguments, 0), container: argument(arguments, 1))
        cache.removeAll()
        await cache.flush()
        emit("cleared")
    }
}
