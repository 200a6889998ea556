import Foundation

extension String {
    /// The key in the one canonical form every level that compares bytes uses: Unicode's NFC.
    ///
    /// Swift compares strings by canonical equivalence (`"\u{E9}" == "e\u{301}"`), and so do the
    /// memory level and every `Set` or `Dictionary` of keys. Their UTF-8 bytes differ, so the levels
    /// that name a key by its bytes (the disk level's file names, the shared level's Redis keys and
    /// the invalidations that name them) use the bytes of this form: two spellings that `==` calls
    /// one key are one key at every level.
    ///
    /// An ASCII key is already in NFC and is returned as it is, without normalizing.
    ///
    /// - Complexity: O(n) in the key's UTF-8 length.
    package var canonicalKey: String {
        for byte in utf8 where byte >= 0x80 { return precomposedStringWithCanonicalMapping }
        return self
    }
}
