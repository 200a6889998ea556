import Testing

@testable import Hoard

@Suite struct FileNamingTests {
    @Test func fileNamesAreTheSHA256OfTheNFCKey() {
        #expect(DiskKey("abc").fileName == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(DiskKey("\u{E9}").fileName == DiskKey("e\u{301}").fileName)
        #expect(DiskKey("\u{E9}").fileName == SHA256Digest.hash(Array("\u{E9}".utf8)).hex)
        #expect(DiskKey("Key").fileName != DiskKey("key").fileName)
        #expect(ContainerFile.isEntryName(DiskKey("../../etc/passwd").fileName))
        #expect(!ContainerFile.isEntryName(ContainerFile.index))
        #expect(!ContainerFile.isEntryName(String(repeating: "A", count: 64)))
    }

    /// What a rebuild hashes, a stored key's bytes, names the file its key names, in either spelling.
    @Test(arguments: ["abc", "", "e\u{301}", "\u{E9}", "cafe\u{301} au lait", "🦄🔥", "שלום", "nul\0byte"])
    func aStoredKeysBytesHashToItsFileName(key: String) {
        let digest = Array(key.utf8).withUnsafeBytes { DiskKey.digest(ofKeyBytes: $0) }
        #expect(digest == DiskKey(key).digest)
    }

    /// A key with one non-ASCII character, at every place of the eight-byte words the ASCII check
    /// reads and of the tail after them, is hashed in its NFC form, as a key made of its NFC bytes is.
    @Test func aNonASCIICharacterAnywhereInTheKeyIsNormalizedBeforeHashing() {
        for length in 0...40 {
            let ascii = String(repeating: "k", count: length)
            #expect(DiskKey(ascii).digest == SHA256Digest.hash(Array(ascii.utf8)))
            for position in 0...length {
                let decomposed = String(ascii.prefix(position)) + "e\u{301}" + String(ascii.dropFirst(position))
                let composed = String(ascii.prefix(position)) + "\u{E9}" + String(ascii.dropFirst(position))
                #expect(DiskKey(decomposed).digest == SHA256Digest.hash(Array(composed.utf8)))
                #expect(DiskKey(decomposed).digest == DiskKey(composed).digest)
            }
        }
    }
}
