import Foundation
import Hoard
import Testing

@testable import HoardRedis

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Opening the connections of a Redis level.
@Suite struct RedisPoolTests {
    @Test func aLevelOutOfDescriptorsNamesTheCallThatFailed() async {
        // In a process of its own: it takes every descriptor its lowered limit allows.
        await #expect(processExitsWith: .success) {
            var limit = rlimit()
            getrlimit(openFileLimit, &limit)
            limit.rlim_cur = 64
            guard setrlimit(openFileLimit, &limit) == 0 else { exit(3) }
            while open("/dev/null", O_RDONLY) >= 0 {}
            do {
                _ = try RedisCacheLevel(url: "redis://127.0.0.1:1/0", namespace: "fds")
                exit(4)
            } catch let error as CacheError {
                let posix = error.underlyingError as? CacheError.FileError
                guard error.code == .io, posix?.operation == "pipe", posix?.errorNumber == EMFILE,
                    error.message.contains("pipe() failed: Too many open files (errno \(EMFILE))")
                else { exit(5) }
            } catch {
                exit(6)
            }
        }
    }
}

#if canImport(Glibc)
private let openFileLimit = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
#else
private let openFileLimit = RLIMIT_NOFILE
#endif
