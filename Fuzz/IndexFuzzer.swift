// libFuzzer target for the index parser (`DiskIndexFile.decode`), built by Fuzz/run.sh together with
// the library files it needs. Any crash, sanitizer report or failed check here fails the run.

/// Decodes arbitrary bytes as an index file; whatever decodes must re-encode to the same records.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzIndex(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: start, count: count)
    guard let records = DiskIndexFile.decode(bytes) else { return 0 }
    let encoded = DiskIndexFile.encode(records)
    let again = encoded.withUnsafeBytes { DiskIndexFile.decode($0) }
    check(again.map { same($0, records) } ?? false, "decoded records do not survive re-encoding")
    check(encoded.count == count, "decoded records re-encode to another size")
    // Only the reserved field (bytes 6 and 7) may differ from the input.
    if bytes[6] == 0 && bytes[7] == 0 {
        check(encoded.elementsEqual(bytes), "a canonical index re-encodes to other bytes")
    }
    return 0
}

private func same(_ lhs: [DiskIndexFile.Record], _ rhs: [DiskIndexFile.Record]) -> Bool {
    lhs.count == rhs.count
        && zip(lhs, rhs).allSatisfy { a, b in
            a.digest == b.digest && a.count == b.count && a.info.size == b.info.size
                && a.info.expiresAt.deadline.bitPattern == b.info.expiresAt.deadline.bitPattern
        }
}

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("fuzz check failed: \(message())") }
}
