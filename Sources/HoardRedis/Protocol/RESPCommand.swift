import Foundation

/// One command in the wire format: an array of bulk strings, binary-safe.
///
/// ```swift
/// var command = RESPCommand("SET", arguments: 2)
/// command.append(key)
/// command.append(value)
/// ```
/// The argument count is given first because it leads the encoding; appending more or fewer
/// arguments than announced is a programming error, caught in debug builds.
struct RESPCommand: Sendable {
    /// The command's name, as in `GET`, for messages.
    let name: String
    /// Whether running the command twice leaves the server as running it once does, and answers
    /// alike (`GET`, `MGET`, `SET … PX`, `UNLINK`, `PTTL`, `SCAN`, `PING`): such a command is sent
    /// again, once, on a fresh connection when its connection is found closed before any byte of
    /// its reply (see ``RedisConnection``).
    let isIdempotent: Bool
    /// The encoded command.
    private(set) var bytes: [UInt8] = []
    private var missing: Int

    /// Starts a command named `name` that takes `count` arguments.
    ///
    /// - Parameters:
    ///   - name: The command, as in `GET`.
    ///   - count: How many arguments follow.
    ///   - isIdempotent: Whether it may be sent twice (see ``isIdempotent``); say so only when it is.
    init(_ name: String, arguments count: Int, isIdempotent: Bool = false) {
        self.name = name
        self.isIdempotent = isIdempotent
        missing = count + 1
        bytes.reserveCapacity(32 + name.utf8.count)
        bytes.append(UInt8(ascii: "*"))
        appendDecimal(count + 1)
        append(name.utf8)
    }

    /// Starts a command from its name and string arguments, as in `RESPCommand("PING", [])`.
    init(_ name: String, _ arguments: [String], isIdempotent: Bool = false) {
        self.init(name, arguments: arguments.count, isIdempotent: isIdempotent)
        for argument in arguments { append(argument.utf8) }
    }

    /// Whether every announced argument was appended.
    var isComplete: Bool { missing == 0 }

    /// Appends one argument of any bytes.
    mutating func append(_ argument: some Collection<UInt8>) {
        assert(missing > 0, "\(name): more arguments than announced")
        missing -= 1
        bytes.append(UInt8(ascii: "$"))
        appendDecimal(argument.count)
        // One copy for contiguous bytes and `Data` (the generic append may go byte by byte).
        let copied: Void? = argument.withContiguousStorageIfAvailable { bytes.append(contentsOf: $0) }
        if copied == nil {
            if let data = argument as? Data {
                data.withUnsafeBytes { bytes.append(contentsOf: $0) }
            } else {
                bytes.append(contentsOf: argument)
            }
        }
        bytes.append(13)
        bytes.append(10)
    }

    /// Appends a string argument, as its UTF-8 bytes.
    mutating func append(_ argument: String) { append(argument.utf8) }

    /// Appends a number argument, in decimal.
    mutating func append(_ number: Int64) { append(String(number).utf8) }

    /// Appends `number` in decimal and a CRLF.
    private mutating func appendDecimal(_ number: Int) {
        if number < 10 {
            bytes.append(UInt8(48 + number))
        } else {
            bytes.append(contentsOf: String(number).utf8)
        }
        bytes.append(13)
        bytes.append(10)
    }
}
