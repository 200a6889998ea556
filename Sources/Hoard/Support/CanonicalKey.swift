extension String {
    /// The key in the one canonical form every level that compares bytes uses: Unicode's NFC.
    ///
    /// Swift compares strings by canonical equivalence (`"\u{E9}" == "e\u{301}"`), and so do the
    /// memory level and every `Set` or `Dictionary` of keys. Their UTF-8 bytes differ, so the levels
    /// that name a key by its bytes (the disk level's file names, the shared level's Redis keys and
    /// the invalidations that name them) use the bytes of this form: two spellings that `==` calls
    /// one key are one key at every level.
    ///
    /// The form is the standard library's own NFC (`_withNFCCodeUnits`), the one its `==` and its
    /// hashing compare: Foundation's `precomposedStringWithCanonicalMapping` normalizes with tables
    /// of its own, older on Linux than the standard library's, and leaves the spellings of newer
    /// characters apart (`"\u{16D67}\u{16D67}"`, which `==` calls `"\u{16D68}"`, added in Unicode 16).
    ///
    /// An ASCII key is already in NFC and is returned as it is, without normalizing.
    ///
    /// - Complexity: O(n) in the key's UTF-8 length.
    package var canonicalKey: String {
        for byte in utf8 where byte >= 0x80 {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(utf8.count)
            _withNFCCodeUnits { bytes.append($0) }
            return String(decoding: bytes, as: UTF8.self)
        }
        return self
    }
}
