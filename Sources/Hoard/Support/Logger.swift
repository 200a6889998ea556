/// Where Hoard reports what it does: evictions, damaged files removed, retries, failed writes.
///
/// Hoard is silent by default. Set ``output`` to see its messages:
/// ```swift
/// HoardLogger.output = { message, level in
///     if level >= .warning { print("[Hoard] \(level): \(message)") }
/// }
/// ```
/// The closure may be called from any thread, including Hoard's background writer, and must be
/// thread-safe. Reading and setting ``output`` is safe from any thread.
public enum HoardLogger {
    /// How much a message matters.
    ///
    /// Complete: these four levels are all there will be, so a `switch` over them needs no default.
    public enum Level: Int, Sendable, Comparable, CustomStringConvertible {
        /// Detail useful while debugging a cache: evictions, rebuilt indexes.
        case debug
        /// A notable event in normal operation: a retry, a fallback value.
        case info
        /// Something went wrong and was handled: a damaged file removed, a failed write.
        case warning
        /// Something went wrong that the user should act on: an unusable container.
        case error

        /// Orders levels from ``debug`` to ``error``.
        public static func < (lhs: Level, rhs: Level) -> Bool { lhs.rawValue < rhs.rawValue }

        /// The level's name, in lower case.
        public var description: String {
            switch self {
            case .debug: "debug"
            case .info: "info"
            case .warning: "warning"
            case .error: "error"
            }
        }
    }

    /// A function that receives every message Hoard reports.
    public typealias Output = @Sendable (_ message: String, _ level: Level) -> Void

    /// The output inside a struct: a function stored as a generic `Locked` state is reabstracted on
    /// every `inout` access, and each read would wrap it in two more thunks, making every later call
    /// slower and deeper.
    private struct Destination {
        var output: Output?
    }

    private static let storage = Locked(Destination())

    /// Receives every message Hoard reports; `nil` (the default) discards them.
    public static var output: Output? {
        get { storage.withLock { $0.output } }
        set { storage.withLock { $0.output = newValue } }
    }

    /// Sends a message to ``output``; the message is only built when someone listens.
    package static func log(_ level: Level, _ message: @autoclosure () -> String) {
        LockOrder.assertNoneHeld("logging")
        guard let output = output else { return }
        output(message(), level)
    }
}

/// Log messages collected while holding a lock, and sent to ``HoardLogger`` once it is released.
///
/// The logger's output is user code: it must never run inside one of Hoard's locks.
struct DeferredLog {
    private var messages: [(level: HoardLogger.Level, message: String)] = []

    /// Keeps a message for ``flush()``; it is only built when someone listens.
    mutating func add(_ level: HoardLogger.Level, _ message: @autoclosure () -> String) {
        guard HoardLogger.output != nil else { return }
        messages.append((level, message()))
    }

    /// Keeps another log's messages after this one's.
    mutating func append(_ other: DeferredLog) { messages += other.messages }

    /// Sends the kept messages; call it after releasing the lock.
    mutating func flush() {
        for entry in messages { HoardLogger.log(entry.level, entry.message) }
        messages.removeAll()
    }
}
