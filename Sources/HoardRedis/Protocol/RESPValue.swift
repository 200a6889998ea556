import Foundation

/// One value of the Redis serialization protocol, RESP2 or RESP3, as ``RESPParser`` reads it.
///
/// RESP3's kinds that carry the same information are folded together: a set is an ``array(_:)``, a
/// verbatim string is a ``bulkString(_:)`` without its format prefix, a blob error is an
/// ``error(_:)``. Attributes are read and dropped.
enum RESPValue: Sendable {
    /// `+OK`: a short string without line breaks.
    case simpleString(String)
    /// `-ERR …` or `!<length>`: the server refused the command; the message starts with its code.
    case error(String)
    /// `:<number>`.
    case integer(Int64)
    /// `$<length>` or `=<length>`: binary-safe bytes.
    case bulkString(Data)
    /// `_`, `$-1` or `*-1`: no value (a missing key).
    case null
    /// `#t` or `#f`.
    case boolean(Bool)
    /// `,<number>`, including `inf`, `-inf` and `nan`.
    case double(Double)
    /// `(<digits>`: an integer too large for 64 bits, as its decimal digits.
    case bigNumber(String)
    /// `*<count>` or `~<count>`: a list or set of values.
    case array([RESPValue])
    /// `%<count>`: keys and values, alternating (`count` pairs, `2 × count` elements).
    case map([RESPValue])
    /// `><count>`: an out-of-band message (RESP3), never the reply to a request.
    case push([RESPValue])

    /// The bytes of a bulk string, or of a simple string; `nil` for any other kind.
    var bytes: Data? {
        switch self {
        case .bulkString(let data): data
        case .simpleString(let string): Data(string.utf8)
        default: nil
        }
    }

    /// The value in the wire format (RESP3; RESP2 for the kinds RESP2 has).
    ///
    /// For the fuzzer and the tests: parsing what this returns gives back an equivalent value.
    var encoded: [UInt8] {
        var bytes: [UInt8] = []
        encode(into: &bytes)
        return bytes
    }

    private func encode(into bytes: inout [UInt8]) {
        func line(_ type: Character, _ text: String) {
            bytes.append(contentsOf: "\(type)\(text)\r\n".utf8)
        }
        func aggregate(_ type: Character, _ count: Int, _ elements: [RESPValue]) {
            line(type, String(count))
            for element in elements { element.encode(into: &bytes) }
        }
        switch self {
        case .simpleString(let string): line("+", string)
        case .error(let message):
            let utf8 = Array(message.utf8)
            if utf8.contains(13) || utf8.contains(10) {
                line("!", String(utf8.count))
                bytes.append(contentsOf: utf8)
                bytes.append(contentsOf: [13, 10])
            } else {
                line("-", message)
            }
        case .integer(let number): line(":", String(number))
        case .bulkString(let data):
            line("$", String(data.count))
            bytes.append(contentsOf: data)
            bytes.append(contentsOf: [13, 10])
        case .null: line("_", "")
        case .boolean(let flag): line("#", flag ? "t" : "f")
        case .double(let number): line(",", String(number))
        case .bigNumber(let digits): line("(", digits)
        case .array(let elements): aggregate("*", elements.count, elements)
        case .map(let elements): aggregate("%", elements.count / 2, elements)
        case .push(let elements): aggregate(">", elements.count, elements)
        }
    }
}

extension RESPValue: CustomStringConvertible {
    /// A short, readable form for messages: bulk strings show their size, not their bytes.
    var description: String {
        switch self {
        case .simpleString(let string): "+\(string)"
        case .error(let message): "-\(message)"
        case .integer(let number): ":\(number)"
        case .bulkString(let data): "$\(data.count) bytes"
        case .null: "null"
        case .boolean(let flag): flag ? "true" : "false"
        case .double(let number): ",\(number)"
        case .bigNumber(let digits): "(\(digits)"
        case .array(let elements): "[\(elements.map(\.description).joined(separator: ", "))]"
        case .map(let elements): "%\(elements.count / 2) pairs"
        case .push(let elements): ">\(elements.count) elements"
        }
    }
}
