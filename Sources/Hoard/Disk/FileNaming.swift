import Foundation

/// A key as the disk level sees it: the key itself, and the SHA-256 of its canonical form that
/// names its file.
///
/// Swift compares strings by canonical equivalence (`"\u{E9}" == "e\u{301}"`), and so does the memory
/// level. Their UTF-8 bytes differ, so the disk level hashes the NFC form (`String.canonicalKey`,
/// which the shared level's Redis keys use too): both spellings name one file, and every level agrees
/// about what one key is. The file name is 64 lowercase hex digits, whatever the key holds (`/`, `..`,
/// NUL, 10 000 characters), so no key can name a path outside its container.
@usableFromInline
struct DiskKey: Sendable {
    /// The key as the caller spelled it; stored in the entry so that keys can be listed.
    @usableFromInline let string: String
    /// The SHA-256 of the key's NFC form.
    let digest: SHA256Digest

    /// Hashes `key`'s canonical form (`String.canonicalKey`, the one the shared level's keys
    /// use too); ASCII keys skip normalization, since they are already in NFC.
    @usableFromInline
    init(_ key: String) {
        string = key
        // A key whose bytes are at hand is checked eight bytes at a time and, when ASCII, hashed
        // from those bytes: a disk hit makes this digest for every read.
        let ascii = key.utf8.withContiguousStorageIfAvailable { bytes -> SHA256Digest? in
            let raw = UnsafeRawBufferPointer(bytes)
            return Self.isASCII(raw) ? SHA256Digest.hash(raw) : nil
        }
        digest = (ascii ?? nil) ?? SHA256Digest.hash(key.canonicalKey.utf8)
    }

    /// The digest of the key whose UTF-8 bytes are `bytes` (valid UTF-8, as an entry file stores
    /// it): the digest ``init(_:)`` computes, without making a string of an ASCII key.
    static func digest(ofKeyBytes bytes: UnsafeRawBufferPointer) -> SHA256Digest {
        if isASCII(bytes) { return SHA256Digest.hash(bytes) }
        return DiskKey(String(decoding: bytes, as: UTF8.self)).digest
    }

    /// Whether every byte of `bytes` is below 0x80.
    static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var high: UInt64 = 0
        var offset = 0
        while offset + 8 <= bytes.count {
            high |= bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
            offset += 8
        }
        while offset < bytes.count {
            high |= UInt64(bytes[offset])
            offset += 1
        }
        return high & 0x8080_8080_8080_8080 == 0
    }

    /// Rebuilds a key from a stored key string and the digest its file is named by.
    init(string: String, digest: SHA256Digest) {
        self.string = string
        self.digest = digest
    }

    /// The entry's file name inside the container.
    var fileName: String { digest.hex }
}

/// The names of the files a disk store keeps in its container besides its entries.
enum ContainerFile {
    /// The saved eviction order.
    static let index = ".hoard-index"
    /// What the container holds: its value type, serializer and schema version.
    static let manifest = ".hoard-manifest"
    /// The prefix of the store's own temporary files; they are swept when a container is opened.
    static let temporaryPrefix = ".hoard-tmp-"

    /// Whether `name` has the shape of an entry file: 64 lowercase hex digits.
    static func isEntryName(_ name: String) -> Bool {
        let utf8 = name.utf8
        guard utf8.count == 64 else { return false }
        return utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }
}
