// libFuzzer target for the RESP reply parser (HoardRedis's `RESPParser`), built by Fuzz/run.sh
// together with the protocol files. Any crash, sanitizer report or failed check fails the run.

/// Parses arbitrary bytes as a stream of replies, whole and cut in pieces; the two must agree, and
/// every reply must survive re-encoding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRESP(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = [UInt8](UnsafeRawBufferPointer(start: start, count: count))
    var limits = RESPLimits()
    limits.maximumReplyCost = 1 << 16
    limits.maximumLineLength = 1 << 10
    let whole = parse([bytes[...]], limits)
    // Cut where the first byte says, then in pieces of that size: the parser is incremental.
    let step = max(1, Int(bytes.first ?? 1) % 17)
    let pieces = stride(from: 0, to: bytes.count, by: step).map { bytes[$0..<min($0 + step, bytes.count)] }
    let cut = parse(pieces, limits)
    check(whole.failed == cut.failed, "whole and cut input disagree on validity")
    check(whole.values.map(\.encoded) == cut.values.map(\.encoded), "whole and cut input give other replies")
    for value in whole.values {
        let again = parse([value.encoded[...]], RESPLimits())
        check(!again.failed && again.values.count == 1, "a reply does not re-parse: \(value)")
        check(again.values.first?.encoded == value.encoded, "a reply changes when re-encoded: \(value)")
    }
    return 0
}

private func parse(_ pieces: [ArraySlice<UInt8>], _ limits: RESPLimits) -> (values: [RESPValue], failed: Bool) {
    var parser = RESPParser(limits: limits)
    var values: [RESPValue] = []
    for piece in pieces {
        do {
            try parser.parse(Array(piece)) { values.append($0) }
        } catch {
            return (values, true)
        }
    }
    return (values, false)
}

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("fuzz check failed: \(message())") }
}
