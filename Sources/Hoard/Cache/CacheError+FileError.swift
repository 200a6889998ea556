import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension CacheError {
    /// An error from a POSIX call: the function's name, the path and `errno`.
    public struct FileError: Error, Sendable, CustomStringConvertible {
        /// The system call that failed, such as `open` or `rename`.
        public let operation: String
        /// The file or folder it was applied to.
        public let path: String
        /// The `errno` value it set.
        public let errorNumber: Int32

        /// Creates the error from a failed call's name, path and `errno`.
        public init(operation: String, path: String, errorNumber: Int32) {
            self.operation = operation
            self.path = path
            self.errorNumber = errorNumber
        }

        /// For example `open(/tmp/x) failed: No such file or directory (errno 2)`.
        public var description: String {
            "\(operation)(\(path)) failed: \(String(cString: strerror(errorNumber))) (errno \(errorNumber))"
        }
    }
}
