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
}
