#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The C calls whose names or types differ between Apple platforms and Linux, in one place.
///
/// The rest of the library calls POSIX the same way everywhere; every difference it has to know of
/// is here (and in ``Lock``, whose primitive is `os_unfair_lock` on Apple platforms and
/// `pthread_mutex_t` elsewhere), so that reading this file is enough to trust the Darwin side.
enum Platform {
    /// `read(2)`, by its module's name: unqualified, `read` means a method in some scopes.
    static func read(_ file: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int {
        #if canImport(Darwin)
        Darwin.read(file, buffer, count)
        #elseif canImport(Glibc)
        Glibc.read(file, buffer, count)
        #else
        Musl.read(file, buffer, count)
        #endif
    }

    /// A file's modification time, in seconds since 1970: `st_mtimespec` on Apple platforms,
    /// `st_mtim` on Linux.
    static func modificationTime(of status: stat) -> Double {
        #if canImport(Darwin)
        let time = status.st_mtimespec
        #else
        let time = status.st_mtim
        #endif
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}
