// libFuzzer target for the index file's journal (`DiskJournal.decode`, `DiskJournal.sections`) and
// the snapshot before it (`DiskIndexFile.decodeSnapshot`), built by Fuzz/run.sh together with the
// library files they need. Any crash, sanitizer report or failed check here fails the run.

/// Reads arbitrary bytes as an index file (a snapshot, then journal records), or as journal records
/// alone when no snapshot heads them; whatever decodes must re-encode to the same bytes.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJournal(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: start, count: count)
    let journalStart = DiskIndexFile.decodeSnapshot(bytes)?.end ?? 0
    check(journalStart <= count, "the snapshot ends past the file")
    let journal = UnsafeRawBufferPointer(rebasing: bytes[journalStart...])
    let decoded = DiskJournal.decode(journal)
    check(decoded.end <= journal.count, "the intact records end past the journal")
    check((decoded.end == journal.count) == (decoded.ending == .clean), "a clean read must use every byte")
    let encoded = DiskJournal.encode(decoded.records)
    check(encoded.elementsEqual(journal[0..<decoded.end]), "decoded records re-encode to other bytes")
    let again = encoded.withUnsafeBytes { DiskJournal.decode($0) }
    check(again.records == decoded.records && again.ending == .clean, "re-encoded records read back differently")
    let sections = DiskJournal.sections(decoded.records)
    let kept = sections.map(\.records.count).reduce(0, +)
    let markers = decoded.records.filter { $0 == .begin || $0 == .commit }.count
    check(kept + markers == decoded.records.count, "sections lose or invent records")
    return 0
}

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("fuzz check failed: \(message())") }
}
