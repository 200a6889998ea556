import Foundation
import Testing

@testable import Hoard

@Suite struct DiskStoreTests {
    init() { TestLog.install() }

    /// Writes `count` entries "key i" = "value i" and returns the folder; the cache is released.
    private func populate(_ folder: TemporaryDirectory, count: Int) async throws {
        let cache = try folder.stringBuilder().maxRamCount(0).build()
        for index in 0..<count { cache["key \(index)"] = "value \(index)" }
        await cache.flush()
    }

    private func reopen(_ folder: TemporaryDirectory) throws -> Cache<String> {
        try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
    }

    private func path(of key: String, in folder: TemporaryDirectory) -> String {
        folder.container().appendingPathComponent(DiskKey(key).fileName).path
    }

    static let hostileKeys: [String] = [
        "", ".", "..", "/", "../../etc/passwd", "/etc/passwd", "a/b/c", "nul\0byte", "\0",
        String(repeating: "x", count: 5_000), "🦄🔥", "Key", "key", "KEY", "\u{E9}", "\\", "~", "-rf",
        "\n\r\t", "%2e%2e%2f", "שלום", "\u{202E}evil", ".hoard-index", ".hoard-tmp-1-1",
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
    ]

    @Test func hostileKeysRoundTripAndStayInsideTheContainer() async throws {
        let folder = TemporaryDirectory()
        let sentinel = folder.url.appendingPathComponent("outside.txt")
        try Data("untouched".utf8).write(to: sentinel)
        do {
            let cache = try folder.stringBuilder().build()
            for (index, key) in Self.hostileKeys.enumerated() { cache[key] = "value \(index)" }
            await cache.flush()
            cache.clearMemory()
            for (index, key) in Self.hostileKeys.enumerated() { #expect(cache[key] == "value \(index)") }
            #expect(cache.diskCount == Self.hostileKeys.count)
        }
        let reopened = try reopen(folder)
        for (index, key) in Self.hostileKeys.enumerated() { #expect(reopened[key] == "value \(index)") }
        #expect(Set(reopened.disk?.keysInEvictionOrder ?? []) == Set(Self.hostileKeys))
        // Nothing but the container (entries and index) and the sentinel exist below the folder.
        let paths = folder.allPaths()
        let containerFiles =
            ["test/.hoard-index", "test/.hoard-lock", "test/.hoard-manifest"] + folder.entryFiles().map { "test/" + $0 }
        let expected = Set(["outside.txt", "test"] + containerFiles)
        #expect(Set(paths) == expected)
        #expect(folder.entryFiles().count == Self.hostileKeys.count)
        #expect(try String(contentsOf: sentinel, encoding: .utf8) == "untouched")
        for key in Self.hostileKeys { reopened.removeValue(forKey: key) }
        await reopened.flush()
        #expect(folder.entryFiles().isEmpty)
    }

    /// A disk hit reads its file into a temporary allocation, on the stack when it is small and on
    /// the heap when it is not: entries of every size read back whole, on a thread whose stack is
    /// far smaller than the largest of them.
    @Test func entriesOfEverySizeReadBackWholeOnAThreadWithASmallStack() async throws {
        let folder = TemporaryDirectory()
        let sizes = [0, 1, 15, 1_000, 1_024, 4_096, 100_000, 8 << 20]
        let values = Dictionary(
            uniqueKeysWithValues: sizes.map { size in
                ("size \(size)", Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ size) }))
            }
        )
        let writer = try folder.dataBuilder().maxRamCount(0).build()
        for (key, value) in values { writer[key] = value }
        await writer.flush()
        #expect(writer.diskCount == sizes.count)

        let reader = try folder.dataBuilder().maxRamCount(0).build(sharingStore: false)
        let read: [String: Data] = await withCheckedContinuation { continuation in
            let thread = Thread {
                var read: [String: Data] = [:]
                for key in values.keys { read[key] = reader[key] }
                continuation.resume(returning: read)
            }
            thread.stackSize = 256 << 10
            thread.start()
        }
        for (key, value) in values { #expect(read[key] == value, "\(key)") }
    }

    @Test func canonicallyEquivalentKeysAreOneKeyInBothLevels() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().build()
        cache["caf\u{E9}"] = "precomposed"
        #expect(cache["cafe\u{301}"] == "precomposed")
        cache["cafe\u{301}"] = "decomposed"
        await cache.flush()
        #expect(cache.diskCount == 1)
        cache.clearMemory()
        #expect(cache["caf\u{E9}"] == "decomposed")
    }

    enum Damage: String, CaseIterable, Sendable {
        case truncated, flippedPayloadByte, flippedHeaderByte, zeroLength, garbage, otherKeysEntry, directory, symlink
    }

    @Test(arguments: Damage.allCases)
    func aDamagedEntryIsAMissRemovedAndLogged(damage: Damage) async throws {
        let folder = TemporaryDirectory()
        try await populate(folder, count: 3)
        let victim = path(of: "key 1", in: folder)
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: victim)))
        switch damage {
        case .truncated: bytes.removeLast(3)
        case .flippedPayloadByte: bytes[bytes.count - 6] ^= 1
        case .flippedHeaderByte: bytes[13] ^= 0x80
        case .zeroLength: bytes = []
        case .garbage: bytes = Array("definitely not an entry".utf8)
        case .otherKeysEntry: bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path(of: "key 2", in: folder))))
        case .directory, .symlink: break
        }
        try FileManager.default.removeItem(atPath: victim)
        switch damage {
        case .directory: try FileManager.default.createDirectory(atPath: victim, withIntermediateDirectories: false)
        case .symlink:
            try FileManager.default.createSymbolicLink(
                atPath: victim,
                withDestinationPath: path(of: "key 0", in: folder)
            )
        default: try Data(bytes).write(to: URL(fileURLWithPath: victim))
        }

        let cache = try reopen(folder)
        #expect(cache["key 1"] == nil)
        #expect(cache["key 0"] == "value 0")
        #expect(cache["key 2"] == "value 2")
        #expect(!FileManager.default.fileExists(atPath: victim))
        #expect(!TestLog.messages(containing: folder.url.path).filter { $0.level == .warning }.isEmpty)
        if damage == .symlink { #expect(cache["key 0"] == "value 0") }  // the link's target is untouched
        // The cache stays usable for that key.
        cache["key 1"] = "fresh"
        await cache.flush()
        cache.clearMemory()
        #expect(cache["key 1"] == "fresh")
    }

    @Test func aDamagedFileFoundWhileRebuildingIsRemoved() async throws {
        let folder = TemporaryDirectory()
        try await populate(folder, count: 4)
        try FileManager.default.removeItem(at: folder.container().appendingPathComponent(".hoard-index"))
        try Data("garbage".utf8).write(to: URL(fileURLWithPath: path(of: "key 3", in: folder)))
        let cache = try reopen(folder)
        #expect(cache.diskCount == 3)
        #expect(folder.entryFiles().count == 3)
        #expect(cache["key 0"] == "value 0")
        #expect(cache["key 3"] == nil)
    }

    @Test(arguments: ["missing", "garbled", "truncated", "stale"])
    func theIndexIsRebuiltFromTheEntryFiles(problem: String) async throws {
        let folder = TemporaryDirectory()
        let indexURL = folder.container().appendingPathComponent(".hoard-index")
        try await populate(folder, count: 10)
        switch problem {
        case "missing":
            try FileManager.default.removeItem(at: indexURL)
        case "garbled":
            var bytes = try [UInt8](Data(contentsOf: indexURL))
            bytes[20] ^= 0xFF
            try Data(bytes).write(to: indexURL)
        case "truncated":
            let bytes = try Data(contentsOf: indexURL)
            try bytes.prefix(bytes.count / 2).write(to: indexURL)
        default:
            // An index from an older state: entries added and removed since.
            let old = try Data(contentsOf: indexURL)
            let cache = try reopen(folder)
            cache["late"] = "added after the index was saved"
            cache.removeValue(forKey: "key 0")
            await cache.flush()
            try old.write(to: indexURL)
        }
        let cache = try reopen(folder)
        let expected = 10  // for "stale": 10 keys, less "key 0", plus "late"
        #expect(cache.diskCount == expected)
        #expect(Set(cache.disk?.keysInEvictionOrder ?? []).count == expected)
        for index in (problem == "stale" ? 1 : 0)..<10 { #expect(cache["key \(index)"] == "value \(index)") }
        if problem == "stale" {
            #expect(cache["late"] == "added after the index was saved")
            #expect(cache["key 0"] == nil)
        }
        await cache.flush()
        #expect(FileManager.default.fileExists(atPath: indexURL.path))
    }

    /// A rebuild hashes each stored key (in place when it is ASCII) to check it names its file: keys
    /// of every shape, a decomposed one among them, survive it; names that only look like an
    /// entry's are left alone.
    @Test func everyKeySurvivesARebuildOfTheIndex() async throws {
        let folder = TemporaryDirectory()
        let keys = Self.hostileKeys + ["cafe\u{301}"]
        do {
            let cache = try folder.stringBuilder().maxRamCount(0).build()
            for (index, key) in keys.enumerated() { cache[key] = "value \(index)" }
            await cache.flush()
        }
        let container = folder.container()
        try FileManager.default.removeItem(at: container.appendingPathComponent(".hoard-index"))
        let lookalikes = [String(repeating: "A", count: 64), String(repeating: "a", count: 63) + "g"]
        for name in lookalikes { try Data("not ours".utf8).write(to: container.appendingPathComponent(name)) }
        let cache = try reopen(folder)
        #expect(cache.diskCount == keys.count)
        #expect(Set(cache.disk?.keysInEvictionOrder ?? []) == Set(keys))
        for (index, key) in keys.enumerated() { #expect(cache[key] == "value \(index)") }
        for name in lookalikes {
            #expect(FileManager.default.fileExists(atPath: container.appendingPathComponent(name).path))
        }
    }

    @Test func temporaryFilesAreSweptAndNeverCounted() async throws {
        let folder = TemporaryDirectory()
        try await populate(folder, count: 2)
        // A process id above any system's pid_max: no live process can own it, whatever runs here.
        let leftover = folder.container().appendingPathComponent(".hoard-tmp-2147483000-1")
        try Data("half written".utf8).write(to: leftover)
        let unrelated = folder.container().appendingPathComponent("notes.txt")
        try Data("not ours".utf8).write(to: unrelated)
        let cache = try reopen(folder)
        #expect(cache.diskCount == 2)
        #expect(!FileManager.default.fileExists(atPath: leftover.path))
        // A file whose name is not an entry's is not ours to delete.
        #expect(FileManager.default.fileExists(atPath: unrelated.path))
    }

    @Test func theCountLimitIsAppliedWhenAContainerIsReopenedSmaller() async throws {
        let folder = TemporaryDirectory()
        try await populate(folder, count: 10)
        let cache = try folder.stringBuilder().maxRamCount(0).maxDiskCount(4).build(sharingStore: false)
        #expect(cache.diskCount == 4)
        #expect(folder.entryFiles().count == 4)
    }

    @Test func entryFilesAreOwnerOnly() async throws {
        let folder = TemporaryDirectory()
        try await populate(folder, count: 1)
        let file = try #require(folder.entryFiles().first)
        let attributes = try FileManager.default.attributesOfItem(
            atPath: folder.container().appendingPathComponent(file).path
        )
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
    }
}
