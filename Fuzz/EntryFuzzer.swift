// libFuzzer target for the entry decoder (`EntryFormat.decode`), built by Fuzz/run.sh together with
// the library files it needs. Any crash, sanitizer report or failed check here fails the run.

/// Decodes arbitrary bytes as an entry file; whatever decodes must re-encode to the same entry.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzEntry(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: start, count: count)
    let decoded = try? EntryFormat.decode(bytes)
    // The two decoders (buffer and array) agree.
    let viaArray = try? EntryFormat.decode([UInt8](bytes))
    check(same(decoded, viaArray), "the array and buffer decoders disagree")
    guard let entry = decoded else { return 0 }
    // A rebuild hashes the key's bytes in place: the digest the key's own spelling names.
    if let layout = try? EntryFormat.check(bytes) {
        let digest = DiskKey.digest(ofKeyBytes: UnsafeRawBufferPointer(rebasing: bytes[layout.key]))
        check(digest == DiskKey(entry.key).digest, "a stored key's bytes hash to another file name")
    } else {
        check(false, "check rejects what decode accepts")
    }
    let encoded = EntryFormat.encode(
        key: entry.key,
        payload: entry.payload,
        schemaVersion: entry.schemaVersion,
        expiresAt: entry.expiresAt
    )
    check(same(try? EntryFormat.decode(encoded), entry), "a decoded entry does not survive re-encoding")
    check(encoded.count == count, "a decoded entry re-encodes to another size")
    // Only the unused flag bits and an unused expiry may differ from the input.
    let flags = UInt16(bytes[6]) | UInt16(bytes[7]) << 8
    if flags == (entry.expiresAt.isNever ? 0 : 1) && (!entry.expiresAt.isNever || bytes[20..<28].allSatisfy { $0 == 0 })
    {
        check(encoded.elementsEqual(bytes), "a canonical entry re-encodes to other bytes")
    }
    return 0
}

private func same(_ lhs: EntryFormat.Entry?, _ rhs: EntryFormat.Entry?) -> Bool {
    switch (lhs, rhs) {
    case (nil, nil): true
    case (let lhs?, let rhs?):
        lhs.key == rhs.key && lhs.payload == rhs.payload && lhs.schemaVersion == rhs.schemaVersion
            && lhs.expiresAt.deadline.bitPattern == rhs.expiresAt.deadline.bitPattern
    default: false
    }
}

private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("fuzz check failed: \(message())") }
}
