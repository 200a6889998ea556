import Foundation

/// The one error type Hoard throws.
///
/// A `CacheError` has a ``code`` that says what kind of failure it is, a ``message`` that tells you
/// what to do, and, where there is one, the ``key`` and the ``underlyingError``. New codes may be
/// added without breaking your code, so match on the codes you care about:
/// ```swift
/// do {
///     let user = try await users.getOrFetch(forKey: "42")
/// } catch CacheError.notFound {
///     // no value and no fetcher
/// } catch let error as CacheError where error.code == .fetchFailed {
///     print(error.key ?? "", error.attempts ?? 0, error.underlyingError ?? error)
/// }
/// ```
/// Two `CacheError` values are equal when their codes are equal, so `catch CacheError.notFound` and
/// `#expect(throws: CacheError.notFound)` match any not-found error, whatever key it carries.
///
/// The ``message`` says what happened in full, cause included: an I/O failure names the call, the
/// path and the system's reason (`open(/…/users) failed: Permission denied (errno 13)`). It is also
/// the error's `localizedDescription` and its `description`.
public struct CacheError: Error, Sendable, Equatable, CustomStringConvertible, LocalizedError {
    /// The kind of a ``CacheError``.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's name, as in `CacheError.Code.notFound`.
        public let description: String

        private init(_ description: String) { self.description = description }

        /// No value is stored for the key, and there is no fetcher to ask.
        public static let notFound = Code("notFound")
        /// Every attempt to fetch the value failed.
        public static let fetchFailed = Code("fetchFailed")
        /// A builder option has an unusable value.
        public static let invalidConfiguration = Code("invalidConfiguration")
        /// The serializer could not turn a value into bytes.
        public static let serializationFailed = Code("serializationFailed")
        /// The serializer could not turn stored bytes back into a value.
        public static let deserializationFailed = Code("deserializationFailed")
        /// A file-system operation failed.
        public static let io = Code("io")
        /// Another process has the container open, and one of the two asked to be alone on it
        /// (``CacheBuilder/exclusiveProcess(_:)``).
        public static let containerInUse = Code("containerInUse")
        /// A value's entry file is larger than the disk level's byte limit, so it is not kept on disk.
        public static let valueTooLarge = Code("valueTooLarge")
        /// A shared level's server (Redis, Valkey) could not be reached, did not answer in time, or
        /// broke the connection; the message names the server and the cause.
        public static let network = Code("network")
        /// A shared level's server received the command and refused it.
        ///
        /// Out of memory (`OOM`), a value of the wrong type (`WRONGTYPE`), no permission
        /// (`NOPERM`), a read-only replica: the message has the server's reply.
        public static let serverRefused = Code("serverRefused")
    }

    /// What kind of failure this is.
    public let code: Code
    /// What happened, and what to do about it.
    public let message: String
    /// The key the failed operation was about, when there is one.
    public let key: String?
    /// How many fetch attempts were made, for ``Code/fetchFailed``.
    public let attempts: Int?
    /// The error that caused this one: a fetcher's, a serializer's or the file system's.
    public let underlyingError: (any Error)?

    /// Creates an error; prefer the static members such as ``fetchFailed(key:attempts:underlying:)``.
    public init(
        code: Code,
        message: String,
        key: String? = nil,
        attempts: Int? = nil,
        underlyingError: (any Error)? = nil
    ) {
        self.code = code
        self.message = message
        self.key = key
        self.attempts = attempts
        self.underlyingError = underlyingError
    }

    /// No value is stored and there is no fetcher.
    public static let notFound = CacheError(code: .notFound, message: "No value is stored for this key.")

    /// Every fetch attempt failed; matches any error with that code (`catch CacheError.fetchFailed`).
    public static let fetchFailed = CacheError(code: .fetchFailed, message: "Every fetch attempt failed.")
    /// A builder option has an unusable value; matches any error with that code.
    public static let invalidConfiguration = CacheError(
        code: .invalidConfiguration,
        message: "A builder option has an unusable value."
    )
    /// The serializer could not encode a value; matches any error with that code.
    public static let serializationFailed = CacheError(
        code: .serializationFailed,
        message: "The serializer could not encode a value."
    )
    /// The serializer could not decode stored bytes; matches any error with that code.
    public static let deserializationFailed = CacheError(
        code: .deserializationFailed,
        message: "The serializer could not decode stored bytes."
    )
    /// A file-system operation failed; matches any error with that code.
    public static let io = CacheError(code: .io, message: "A file-system operation failed.")
    /// A value's entry is larger than the disk level's byte limit; matches any error with that code.
    public static let valueTooLarge = CacheError(
        code: .valueTooLarge,
        message: "A value's entry file is larger than the disk level's byte limit."
    )
    /// Another process has the container open; matches any error with that code.
    public static let containerInUse = CacheError(
        code: .containerInUse,
        message: "Another process has the container open."
    )
    /// A shared level's server failed; matches any error with that code (`catch CacheError.network`).
    public static let network = CacheError(code: .network, message: "A shared level's server failed.")
    /// A shared level's server refused a command; matches any error with that code
    /// (`catch CacheError.serverRefused`).
    public static let serverRefused = CacheError(
        code: .serverRefused,
        message: "A shared level's server refused the command."
    )

    /// No value is stored for `key`.
    public static func notFound(key: String) -> CacheError {
        CacheError(code: .notFound, message: "No value is stored for key \"\(key)\".", key: key)
    }

    /// No value is stored for `key`, and the cache has no fetcher to ask (code ``Code/notFound``).
    public static func noFetcher(key: String) -> CacheError {
        CacheError(
            code: .notFound,
            message: "No value is stored for key \"\(key)\", and the cache has no fetcher to ask: "
                + "give the builder one with .fetcher(_:) to fetch what the cache lacks.",
            key: key
        )
    }

    /// A `conditioned` level skipped `key`: its condition refused it (code ``Code/notFound``, so
    /// that a composition goes on to the next level).
    public static func refused(key: String) -> CacheError {
        CacheError(
            code: .notFound,
            message: "The level skipped key \"\(key)\": its condition (conditioned { … }) refused the key.",
            key: key
        )
    }

    /// Every fetch attempt for `key` failed; `underlying` is the last attempt's error.
    public static func fetchFailed(key: String, attempts: Int, underlying: any Error) -> CacheError {
        CacheError(
            code: .fetchFailed,
            message: "Fetching key \"\(key)\" failed after \(attempts) attempt(s): \(underlying)",
            key: key,
            attempts: attempts,
            underlyingError: underlying
        )
    }

    /// A builder option has an unusable value; `message` names the option.
    public static func invalidConfiguration(_ message: String) -> CacheError {
        CacheError(code: .invalidConfiguration, message: message)
    }

    /// The serializer failed to encode the value for `key`.
    public static func serializationFailed(key: String?, underlying: any Error) -> CacheError {
        serializerError(.serializationFailed, "serialize the value", key, underlying)
    }

    /// The serializer failed to decode the stored bytes for `key`.
    public static func deserializationFailed(key: String?, underlying: any Error) -> CacheError {
        serializerError(.deserializationFailed, "deserialize the value", key, underlying)
    }

    private static func serializerError(
        _ code: Code,
        _ what: String,
        _ key: String?,
        _ underlying: any Error
    )
        -> CacheError
    {
        CacheError(
            code: code,
            message: "Could not \(what)\(key.map { " for key \"\($0)\"" } ?? ""): \(underlying)",
            key: key,
            underlyingError: underlying
        )
    }

    /// A file-system operation failed; `message` says which and where, and the system's reason
    /// from `underlying` (a ``CacheError/FileError``, or a Foundation error) is added to it.
    public static func io(_ message: String, key: String? = nil, underlying: (any Error)? = nil) -> CacheError {
        let cause = underlying.map(Self.cause(of:)).map { " " + $0 } ?? ""
        return CacheError(code: .io, message: message + cause, key: key, underlyingError: underlying)
    }

    /// The system's reason for a file-system failure, in one sentence.
    private static func cause(of error: any Error) -> String {
        if let posix = error as? CacheError.FileError { return posix.description + "." }
        if let cacheError = error as? CacheError { return cacheError.message }
        let nsError = error as NSError
        if nsError.domain == NSPOSIXErrorDomain {
            return "\(String(cString: strerror(Int32(truncatingIfNeeded: nsError.code)))) (errno \(nsError.code))."
        }
        if let underlying = nsError.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain
        {
            let reason = String(cString: strerror(Int32(truncatingIfNeeded: underlying.code)))
            return "\(nsError.localizedDescription) (\(reason), errno \(underlying.code))."
        }
        return "\(nsError.localizedDescription)"
    }

    /// The entry file of the value for `key` would take `size` bytes, more than the whole byte limit
    /// of the disk level (`maxDiskBytes`): it is not kept on disk.
    public static func valueTooLarge(key: String, size: Int, byteLimit: Int) -> CacheError {
        CacheError(
            code: .valueTooLarge,
            message: "The value for key \"\(key)\" is not kept on disk: its entry file takes \(size) bytes, more than "
                + "the whole byte limit (maxDiskBytes \(byteLimit)). Raise maxDiskBytes, or store it elsewhere.",
            key: key
        )
    }

    /// Another process holds the lock of the container at `path`.
    public static func containerInUse(path: String) -> CacheError {
        CacheError(
            code: .containerInUse,
            message: "The container \(path) is open in another process, and one of the two asked to be alone on "
                + "it with exclusiveProcess(true). Close the cache there, open both without exclusiveProcess(true) "
                + "to share the container, or give this process a container of its own."
        )
    }

    /// Compares codes only: the key, message and underlying error do not take part.
    public static func == (lhs: CacheError, rhs: CacheError) -> Bool { lhs.code == rhs.code }

    /// Lets `catch CacheError.notFound` match any error with that code.
    public static func ~= (pattern: CacheError, value: any Error) -> Bool {
        (value as? CacheError)?.code == pattern.code
    }

    /// The code and the message.
    public var description: String { "CacheError.\(code): \(message)" }

    /// The message: what happened, cause included.
    public var errorDescription: String? { message }
}

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
