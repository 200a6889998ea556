import Foundation

/// How much one reply may hold, so that a server (or anything pretending to be one) cannot make
/// the client allocate without bound.
struct RESPLimits: Sendable {
    /// The most a reply may cost: the bytes of its strings and lines, plus ``costPerValue`` each value.
    ///
    /// The memory a parsed reply takes is about this cost.
    var maximumReplyCost: Int = 64 << 20
    /// The most aggregates (arrays, maps, sets, pushes, attributes) nested in one another.
    var maximumDepth: Int = 16
    /// The longest line: a simple string, an error, a number or a header.
    var maximumLineLength: Int = 64 << 10

    /// What each value of a reply costs on top of its bytes: about what it takes in memory.
    static let costPerValue = 32
}

/// Why bytes are not a valid RESP stream: the connection that sent them cannot be trusted further.
struct RESPParseError: Error, Sendable, CustomStringConvertible {
    /// What was wrong, for the error message.
    let description: String
}

/// Reads RESP2 and RESP3 replies from a byte stream, incrementally: feed it what the socket
/// delivered, however it was cut, and it hands out each reply once its last byte has arrived.
///
/// Parsing is total: any input either yields values or throws ``RESPParseError`` (malformed,
/// unsupported or over ``RESPLimits``); it never traps and never allocates more than the limits
/// allow, whatever the lengths in the headers say. After an error the parser stays failed.
///
/// - Complexity: O(n) in the bytes fed, however they are split.
struct RESPParser: Sendable {
    private enum AggregateKind {
        case array, map, push, attribute
    }

    private struct Frame {
        var kind: AggregateKind
        var expected: Int
        var elements: [RESPValue]
    }

    private enum BulkKind {
        case string, verbatim, error
    }

    private struct Bulk {
        var kind: BulkKind
        /// Payload bytes still to come.
        var remaining: Int
        /// Bytes of the closing CRLF seen so far (0, 1 or 2).
        var trailer: Int
        var data: Data
    }

    let limits: RESPLimits
    /// The start of a line not terminated yet.
    private var line: [UInt8] = []
    private var bulk: Bulk?
    private var stack: [Frame] = []
    /// What the reply being read may still cost.
    private var budget: Int
    private var failure: RESPParseError?

    init(limits: RESPLimits = RESPLimits()) {
        self.limits = limits
        budget = limits.maximumReplyCost
    }

    /// Whether the parser holds part of a reply: more bytes are needed to finish it.
    var isInsideReply: Bool { !line.isEmpty || bulk != nil || !stack.isEmpty }

    /// Parses `input`, calling `emit` with every reply it completes, in order.
    ///
    /// - Throws: ``RESPParseError`` when the stream is malformed or a reply is over the limits; every
    ///   later call throws it again.
    mutating func parse(_ input: UnsafeRawBufferPointer, emit: (RESPValue) -> Void) throws(RESPParseError) {
        if let failure { throw failure }
        do {
            try parseAll(input, emit: emit)
        } catch {
            failure = error
            throw error
        }
    }

    /// Parses `input` given as an array; see ``parse(_:emit:)``.
    mutating func parse(_ input: [UInt8], emit: (RESPValue) -> Void) throws(RESPParseError) {
        var result: Result<Void, RESPParseError> = .success(())
        input.withUnsafeBytes { buffer in
            do throws(RESPParseError) {
                try parse(buffer, emit: emit)
            } catch {
                result = .failure(error)
            }
        }
        try result.get()
    }

    private mutating func parseAll(_ input: UnsafeRawBufferPointer, emit: (RESPValue) -> Void) throws(RESPParseError) {
        var index = 0
        while index < input.count {
            if bulk != nil {
                index = try continueBulk(input, from: index, emit: emit)
                continue
            }
            // A line: up to the next LF, which must follow a CR.
            let rest = UnsafeRawBufferPointer(rebasing: input[index...])
            guard let newline = rest.firstIndex(of: 10) else {
                guard line.count + rest.count <= limits.maximumLineLength else {
                    throw RESPParseError(description: "a line longer than \(limits.maximumLineLength) bytes")
                }
                line.append(contentsOf: rest)
                return
            }
            guard line.count + newline <= limits.maximumLineLength else {
                throw RESPParseError(description: "a line longer than \(limits.maximumLineLength) bytes")
            }
            let next = index + newline + 1
            var used = 0
            if line.isEmpty {
                used = try handleLine(
                    UnsafeRawBufferPointer(rebasing: rest[..<newline]),
                    input,
                    after: next,
                    emit: emit
                )
            } else {
                line.append(contentsOf: rest[..<newline])
                let whole = line
                line.removeAll(keepingCapacity: true)
                let outcome = whole.withUnsafeBytes { bytes -> Result<Int, RESPParseError> in
                    do throws(RESPParseError) {
                        return .success(try handleLine(bytes, input, after: next, emit: emit))
                    } catch {
                        return .failure(error)
                    }
                }
                used = try outcome.get()
            }
            index = next + used
        }
    }

    /// Handles one line without its LF; `input` from `after` holds what follows it.
    ///
    /// - Returns: How many bytes after the line it used: a bulk string's payload and CRLF when they
    ///   were all there, else 0.
    private mutating func handleLine(
        _ raw: UnsafeRawBufferPointer,
        _ input: UnsafeRawBufferPointer,
        after: Int,
        emit: (RESPValue) -> Void
    ) throws(RESPParseError) -> Int {
        guard raw.count >= 2, raw[raw.count - 1] == 13 else {
            throw RESPParseError(description: "an empty line, or one not ended by CRLF")
        }
        let content = UnsafeRawBufferPointer(rebasing: raw[1..<(raw.count - 1)])
        if content.contains(13) { throw RESPParseError(description: "a CR inside a line") }
        try charge(RESPLimits.costPerValue + raw.count)
        switch raw[0] {
        case UInt8(ascii: "$"): return try startBulk(.string, content, input, after: after, emit: emit)
        case UInt8(ascii: "="): return try startBulk(.verbatim, content, input, after: after, emit: emit)
        case UInt8(ascii: "!"): return try startBulk(.error, content, input, after: after, emit: emit)
        default:
            try handleScalarOrAggregate(raw[0], content, emit: emit)
            return 0
        }
    }

    /// Handles a line that is a whole value or an aggregate's header.
    private mutating func handleScalarOrAggregate(
        _ type: UInt8,
        _ content: UnsafeRawBufferPointer,
        emit: (RESPValue) -> Void
    ) throws(RESPParseError) {
        switch type {
        case UInt8(ascii: "+"): try complete(.simpleString(String(decoding: content, as: UTF8.self)), emit: emit)
        case UInt8(ascii: "-"): try complete(.error(String(decoding: content, as: UTF8.self)), emit: emit)
        case UInt8(ascii: ":"): try complete(.integer(try Self.integer(content)), emit: emit)
        case UInt8(ascii: "_"):
            guard content.isEmpty else { throw RESPParseError(description: "a null with content") }
            try complete(.null, emit: emit)
        case UInt8(ascii: "#"):
            guard content.count == 1, content[0] == UInt8(ascii: "t") || content[0] == UInt8(ascii: "f") else {
                throw RESPParseError(description: "a boolean that is neither t nor f")
            }
            try complete(.boolean(content[0] == UInt8(ascii: "t")), emit: emit)
        case UInt8(ascii: ","):
            guard let number = Double(String(decoding: content, as: UTF8.self)) else {
                throw RESPParseError(description: "a double that is not a number")
            }
            try complete(.double(number), emit: emit)
        case UInt8(ascii: "("):
            let digits = content.first == UInt8(ascii: "-") ? content.dropFirst() : content[...]
            guard !digits.isEmpty, digits.allSatisfy({ $0 >= 48 && $0 <= 57 }) else {
                throw RESPParseError(description: "a big number that is not digits")
            }
            try complete(.bigNumber(String(decoding: content, as: UTF8.self)), emit: emit)
        case UInt8(ascii: "*"): try startAggregate(.array, content, emit: emit)
        case UInt8(ascii: "~"): try startAggregate(.array, content, emit: emit)
        case UInt8(ascii: "%"): try startAggregate(.map, content, emit: emit)
        case UInt8(ascii: ">"): try startAggregate(.push, content, emit: emit)
        case UInt8(ascii: "|"): try startAggregate(.attribute, content, emit: emit)
        case let type:
            throw RESPParseError(description: "an unknown type byte 0x\(String(type, radix: 16))")
        }
    }

    /// Takes `cost` from what the current reply may still cost.
    private mutating func charge(_ cost: Int) throws(RESPParseError) {
        guard cost <= budget else {
            throw RESPParseError(description: "a reply larger than the limit of \(limits.maximumReplyCost) bytes")
        }
        budget -= cost
    }

    /// A header's length or count: a decimal number, or -1 for null (in RESP2).
    private static func length(_ content: UnsafeRawBufferPointer) throws(RESPParseError) -> Int? {
        if content.count == 1 && content[0] == UInt8(ascii: "?") {
            throw RESPParseError(description: "a streamed string or aggregate, which is not supported")
        }
        let number = try integer(content)
        if number == -1 { return nil }
        guard number >= 0, let length = Int(exactly: number) else {
            throw RESPParseError(description: "a negative or impossible length \(number)")
        }
        return length
    }

    /// A signed decimal 64-bit integer, strictly: an optional sign and 1 to 19 digits, no overflow.
    private static func integer(_ content: UnsafeRawBufferPointer) throws(RESPParseError) -> Int64 {
        var digits = content[...]
        var isNegative = false
        if let sign = digits.first, sign == UInt8(ascii: "-") || sign == UInt8(ascii: "+") {
            isNegative = sign == UInt8(ascii: "-")
            digits = digits.dropFirst()
        }
        guard !digits.isEmpty else { throw RESPParseError(description: "a number without digits") }
        var magnitude: UInt64 = 0
        for byte in digits {
            guard byte >= 48 && byte <= 57 else { throw RESPParseError(description: "a number with a non-digit") }
            let (times10, overflow1) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(UInt64(byte - 48))
            guard !overflow1 && !overflow2 else { throw RESPParseError(description: "a number past 64 bits") }
            magnitude = sum
        }
        if isNegative {
            guard magnitude <= UInt64(Int64.max) + 1 else {
                throw RESPParseError(description: "a number past 64 bits")
            }
            return magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude)
        }
        guard magnitude <= UInt64(Int64.max) else { throw RESPParseError(description: "a number past 64 bits") }
        return Int64(magnitude)
    }

    /// Starts a bulk payload; returns how many bytes of `input` after `after` it used.
    private mutating func startBulk(
        _ kind: BulkKind,
        _ content: UnsafeRawBufferPointer,
        _ input: UnsafeRawBufferPointer,
        after: Int,
        emit: (RESPValue) -> Void
    ) throws(RESPParseError) -> Int {
        guard let length = try Self.length(content) else {
            guard kind == .string else { throw RESPParseError(description: "a null verbatim string or blob error") }
            try complete(.null, emit: emit)
            return 0
        }
        if kind == .verbatim && length < 4 {
            throw RESPParseError(description: "a verbatim string without its format prefix")
        }
        try charge(length)
        let available = input.count - after
        // The whole payload and its CRLF are here: one copy, no partial state.
        if available >= length + 2 {
            let payload = UnsafeRawBufferPointer(rebasing: input[after..<(after + length)])
            guard input[after + length] == 13, input[after + length + 1] == 10 else {
                throw RESPParseError(description: "a string not followed by CRLF")
            }
            try complete(Self.value(kind, Data(payload)), emit: emit)
            return length + 2
        }
        // Grow with what arrives rather than trusting the header with one large allocation.
        var data = Data()
        data.reserveCapacity(min(length, 1 << 20))
        bulk = Bulk(kind: kind, remaining: length, trailer: 0, data: data)
        return 0
    }

    /// Continues a bulk payload with `input` from `index`; returns the index after what it used.
    private mutating func continueBulk(
        _ input: UnsafeRawBufferPointer,
        from index: Int,
        emit: (RESPValue) -> Void
    ) throws(RESPParseError) -> Int {
        guard var current = bulk else { return index }
        var index = index
        if current.remaining > 0 {
            let take = min(current.remaining, input.count - index)
            // One copy of the whole piece (the generic `append(contentsOf:)` may go byte by byte).
            if take > 0, let base = input.baseAddress {
                current.data.append(base.advanced(by: index).assumingMemoryBound(to: UInt8.self), count: take)
            }
            current.remaining -= take
            index += take
        }
        while current.remaining == 0 && current.trailer < 2 && index < input.count {
            let expected: UInt8 = current.trailer == 0 ? 13 : 10
            guard input[index] == expected else { throw RESPParseError(description: "a string not followed by CRLF") }
            current.trailer += 1
            index += 1
        }
        if current.remaining == 0 && current.trailer == 2 {
            bulk = nil
            try complete(Self.value(current.kind, current.data), emit: emit)
        } else {
            bulk = current
        }
        return index
    }

    private static func value(_ kind: BulkKind, _ data: Data) -> RESPValue {
        switch kind {
        case .string: .bulkString(data)
        case .verbatim: .bulkString(Data(data.dropFirst(4)))
        case .error: .error(String(decoding: data, as: UTF8.self))
        }
    }

    private mutating func startAggregate(
        _ kind: AggregateKind,
        _ content: UnsafeRawBufferPointer,
        emit: (RESPValue) -> Void
    ) throws(RESPParseError) {
        guard let count = try Self.length(content) else {
            guard kind == .array else { throw RESPParseError(description: "a null map, push or attribute") }
            return try complete(.null, emit: emit)
        }
        let (expected, overflow) = count.multipliedReportingOverflow(by: kind == .map || kind == .attribute ? 2 : 1)
        // Each element costs at least `costPerValue`: refuse a count the budget cannot pay for now,
        // before reserving anything.
        guard !overflow, expected <= budget / RESPLimits.costPerValue else {
            throw RESPParseError(description: "an aggregate of \(count) elements, over the reply limit")
        }
        guard stack.count < limits.maximumDepth else {
            throw RESPParseError(description: "aggregates nested more than \(limits.maximumDepth) deep")
        }
        if expected == 0 {
            return try complete(Self.value(kind, []), emit: emit, isAttribute: kind == .attribute)
        }
        var elements: [RESPValue] = []
        elements.reserveCapacity(min(expected, 1024))
        stack.append(Frame(kind: kind, expected: expected, elements: elements))
    }

    private static func value(_ kind: AggregateKind, _ elements: [RESPValue]) -> RESPValue {
        switch kind {
        case .array, .attribute: .array(elements)
        case .map: .map(elements)
        case .push: .push(elements)
        }
    }

    /// Adds a finished value to the aggregate it belongs to, or emits it when it is a whole reply.
    ///
    /// An attribute describes the value after it and is dropped: it is never an element.
    private mutating func complete(
        _ value: RESPValue,
        emit: (RESPValue) -> Void,
        isAttribute: Bool = false
    ) throws(RESPParseError) {
        var value = value
        var isAttribute = isAttribute
        while true {
            if isAttribute { return }
            guard var top = stack.popLast() else {
                emit(value)
                budget = limits.maximumReplyCost
                return
            }
            top.elements.append(value)
            if top.elements.count < top.expected {
                stack.append(top)
                return
            }
            value = Self.value(top.kind, top.elements)
            isAttribute = top.kind == .attribute
        }
    }
}
