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
}
