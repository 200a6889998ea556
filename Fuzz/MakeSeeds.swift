// Writes the seed corpus of the fuzz targets: valid entries and indexes, and edge cases.
// Built and run by `Fuzz/run.sh --make-seeds` with the library files it needs; the output is
// checked in under Fuzz/corpus, so fuzzing starts from real files.

import Foundation

@main
enum MakeSeeds {
    static func main() throws {
        let root = URL(fileURLWithPath: CommandLine.arguments.dropFirst().first ?? "Fuzz/corpus", isDirectory: true)
        let entries = root.appendingPathComponent("entry", isDirectory: true)
        let indexes = root.appendingPathComponent("index", isDirectory: true)
        let journals = root.appendingPathComponent("journal", isDirectory: true)
        for folder in [entries, indexes, journals] {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        }
        func save(_ bytes: [UInt8], _ name: String, in folder: URL) throws {
            try Data(bytes).write(to: folder.appendingPathComponent(name))
        }

        let valid: [(String, [UInt8])] = [
            (
                "empty-key-empty-payload",
                EntryFormat.encode(key: "", payload: Data(), schemaVersion: 0, expiresAt: .never)
            ),
            (
                "json",
                EntryFormat.encode(
                    key: "user/42",
                    payload: Data(#"{"id":"42","name":"Ada"}"#.utf8),
                    schemaVersion: 0,
                    expiresAt: .never
                )
            ),
            (
                "expiring",
                EntryFormat.encode(
                    key: "feed",
                    payload: Data("home".utf8),
                    schemaVersion: 2,
                    expiresAt: .at(1_800_000_000.5)
                )
            ),
            (
                "unicode-key",
                EntryFormat.encode(
                    key: "caf\u{E9} \u{1F600}",
                    payload: Data([0, 1, 2, 255]),
                    schemaVersion: 7,
                    expiresAt: .never
                )
            ),
            (
                "binary-payload",
                EntryFormat.encode(
                    key: "k",
                    payload: Data((0..<512).map { UInt8($0 % 256) }),
                    schemaVersion: 0,
                    expiresAt: .at(-1)
                )
            ),
        ]
        for (name, bytes) in valid { try save(bytes, name, in: entries) }
        let json = valid[1].1
        var badChecksum = json
        badChecksum[badChecksum.count - 1] ^= 0xFF
        var hugeLength = json
        hugeLength.replaceSubrange(16..<20, with: [0xFF, 0xFF, 0xFF, 0xFF])
        var invalidUTF8 = EntryFormat.encode(key: "ab", payload: Data(), schemaVersion: 0, expiresAt: .never)
        invalidUTF8[28] = 0xC3
        try save(badChecksum, "edge-bad-checksum", in: entries)
        try save(hugeLength, "edge-huge-payload-length", in: entries)
        try save(Array(json.prefix(30)), "edge-truncated", in: entries)
        try save(Array("HRDE".utf8), "edge-magic-only", in: entries)
        try save(invalidUTF8, "edge-invalid-utf8-key", in: entries)

        func record(_ key: String, count: UInt32, size: Int, expiresAt: Expiry = .never) -> DiskIndexFile.Record {
            DiskIndexFile.Record(
                digest: SHA256Digest.hash(key.utf8),
                count: count,
                info: DiskEntryInfo(size: size, expiresAt: expiresAt)
            )
        }
        let three = DiskIndexFile.encode([
            record("a", count: 1, size: 40),
            record("caf\u{E9}", count: 9, size: 4_096, expiresAt: .at(1_800_000_000.25)),
            record("", count: 0, size: 32),
        ])
        try save(DiskIndexFile.encode([]), "empty", in: indexes)
        try save(three, "three-records", in: indexes)
        try save(
            DiskIndexFile.encode((0..<20).map { record("key \($0)", count: UInt32($0), size: 100 + $0) }),
            "twenty-records",
            in: indexes
        )
        var hugeCount = three
        hugeCount.replaceSubrange(8..<12, with: [0xFF, 0xFF, 0xFF, 0x7F])
        var hugeSize = three
        hugeSize.replaceSubrange(48..<56, with: [UInt8](repeating: 0xFF, count: 8))
        try save(hugeCount, "edge-huge-count", in: indexes)
        try save(hugeSize, "edge-huge-size", in: indexes)
        try save(Array(three.dropLast(5)), "edge-truncated", in: indexes)
        try save(Array("HRDI".utf8) + [1, 0, 0, 0], "edge-header-only", in: indexes)
        try save(Array("HRDI".utf8) + [2, 0, 0, 0, 0, 0, 0, 0], "edge-version-2", in: indexes)

        // Index files with journals: committed sections, an uncommitted one, a torn tail, damage.
        let digest = SHA256Digest.hash("a".utf8)
        let put = DiskJournal.Record.put(digest: digest, size: 40, expiresAt: .never, key: "a")
        let committed = DiskJournal.encode([
            .begin, put, .remove(digest: SHA256Digest.hash("b".utf8), key: nil),
            .remove(digest: SHA256Digest.hash("c".utf8), key: "c"), .commit,
        ])
        let expiring = DiskJournal.encode([
            .begin,
            .put(digest: SHA256Digest.hash("caf\u{E9}".utf8), size: 9, expiresAt: .at(1_800_000_000), key: "caf\u{E9}"),
            .commit, .begin, .clear, .commit,
        ])
        try save(three + committed, "snapshot-and-journal", in: journals)
        try save(three + committed + expiring, "two-sections-and-a-clear", in: journals)
        try save(committed + DiskJournal.encode([.begin, put]), "uncommitted-section", in: journals)
        try save(Array((three + committed).dropLast(3)), "edge-torn-tail", in: journals)
        var damaged = three + committed + expiring
        damaged[three.count + 9] ^= 0x40
        try save(damaged, "edge-damaged-middle", in: journals)
        var hugeRecord = committed
        hugeRecord.replaceSubrange(0..<4, with: [0xFF, 0xFF, 0xFF, 0xFF])
        try save(hugeRecord, "edge-huge-length", in: journals)
        print(
            "Wrote \(valid.count + 5) entry seeds to \(entries.path), 8 index seeds to \(indexes.path) and 6 "
                + "journal seeds to \(journals.path)"
        )
    }
}
