import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Damage injected into well over 100 entry files at a time, or into the index.
///
/// Whatever the damage, and whether it is found by a cache that has the container open, by a cache
/// that reopens it with its index, or while a cache rebuilds a lost index: no crash, no wrong value,
/// every damaged file removed, every intact entry still served, and the cache usable afterwards for
/// the damaged keys too.
@Suite(.timeLimit(.minutes(10)))
struct DamageInjectionTests {
    init() { TestLog.install() }

    /// Entries written; the first `damagedCount` are damaged, the rest stay intact.
    static let entryCount = 110
    static let damagedCount = 100

    static func key(_ index: Int) -> String { "key \(index)" }
    static func value(_ index: Int) -> String { "value \(index) " + String(repeating: "x", count: index % 17) }

    /// What is done to each damaged entry file.
    enum Damage: String, CaseIterable, Sendable {
        case truncated, extended, zeroLength, garbage
        case flippedHeaderByte, flippedKeyByte, flippedPayloadByte, flippedChecksumByte
        /// Pairs of files exchanged: each holds the other key's intact entry.
        case swapped
        /// An empty folder in place of the file.
        case directory
        /// A symbolic link to an intact copy of the entry, kept outside the container.
        case symlinkToOwnCopy
        /// A symbolic link to another key's entry file inside the container.
        case symlinkToOtherEntry
    }

    /// Who finds the damage.
    ///
    /// A cache reopening the container with its index finds damage the way an open cache does (by
    /// reading the file on a lookup), so it is left out: removing files costs about 2 ms each on
    /// a slow disk, and the matrix removes thousands.
    enum Discovery: String, CaseIterable, Sendable {
        /// The cache that wrote the entries, its memory cleared: finds damage when it reads a file.
        case openCache
        /// A new cache on a container whose index is gone: it reads every file when it opens.
        case rebuiltWithoutIndex
    }

    @Test(arguments: Damage.allCases, Discovery.allCases)
    func damagedEntriesAreMissesRemovedAndTheCacheStaysUsable(damage: Damage, discovery: Discovery) async throws {
        let folder = TemporaryDirectory()
        var random = SplitMix64(seed: UInt64(Damage.allCases.firstIndex(of: damage)! * 7 + 3))
        let writer = try folder.stringBuilder().build(sharingStore: false)
        for index in 0..<Self.entryCount { writer[Self.key(index)] = Self.value(index) }
        await writer.flush()
        #expect(writer.diskCount == Self.entryCount)

        let outside = folder.url.appendingPathComponent("outside", isDirectory: true)
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        let damagedPaths = (0..<Self.damagedCount).map { entryPath(Self.key($0), folder) }
        var untouchedCopies: [String: [UInt8]] = [:]
        for (index, path) in damagedPaths.enumerated() {
            var bytes = try RawFiles.read(path)
            let keyLength = Self.key(index).utf8.count
            let payloadEnd = bytes.count - EntryFormat.trailerSize
            switch damage {
            case .truncated:
                bytes.removeLast(Int.random(in: 1...bytes.count - 1, using: &random))
            case .extended:
                bytes += (0..<Int.random(in: 1...40, using: &random)).map { _ in
                    UInt8.random(in: 0...255, using: &random)
                }
            case .zeroLength:
                bytes = []
            case .garbage:
                bytes = (0..<Int.random(in: 0...200, using: &random)).map { _ in
                    UInt8.random(in: 0...255, using: &random)
                }
            case .flippedHeaderByte:
                bytes[Int.random(in: 0..<EntryFormat.headerSize, using: &random)] ^= UInt8.random(
                    in: 1...255,
                    using: &random
                )
            case .flippedKeyByte:
                let range = EntryFormat.headerSize..<EntryFormat.headerSize + keyLength
                bytes[Int.random(in: range, using: &random)] ^= UInt8.random(in: 1...255, using: &random)
            case .flippedPayloadByte:
                let range = EntryFormat.headerSize + keyLength..<payloadEnd
                bytes[Int.random(in: range, using: &random)] ^= UInt8.random(in: 1...255, using: &random)
            case .flippedChecksumByte:
                bytes[Int.random(in: payloadEnd..<bytes.count, using: &random)] ^= UInt8.random(
                    in: 1...255,
                    using: &random
                )
            case .swapped, .directory, .symlinkToOwnCopy, .symlinkToOtherEntry:
                break
            }
            switch damage {
            case .swapped:
                if index % 2 == 1 {
                    let other = damagedPaths[index - 1]
                    let parked = outside.appendingPathComponent("parked").path
                    try FileManager.default.moveItem(atPath: path, toPath: parked)
                    try FileManager.default.moveItem(atPath: other, toPath: path)
                    try FileManager.default.moveItem(atPath: parked, toPath: other)
                }
            case .directory:
                try FileManager.default.removeItem(atPath: path)
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            case .symlinkToOwnCopy:
                let copy = outside.appendingPathComponent("copy-\(index)").path
                try FileManager.default.moveItem(atPath: path, toPath: copy)
                try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: copy)
                untouchedCopies[copy] = bytes
            case .symlinkToOtherEntry:
                try FileManager.default.removeItem(atPath: path)
                let target = entryPath(
                    Self.key(Self.damagedCount + index % (Self.entryCount - Self.damagedCount)),
                    folder
                )
                try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: target)
            default:
                try RawFiles.write(bytes, to: path)
            }
        }

        let reader: Cache<String>
        switch discovery {
        case .openCache:
            writer.clearMemory()
            reader = writer
        case .rebuiltWithoutIndex:
            try FileManager.default.removeItem(at: folder.container().appendingPathComponent(ContainerFile.index))
            reader = try folder.stringBuilder().build(sharingStore: false)
        }

        // No wrong value: a damaged entry is a miss, an intact one is served.
        for index in 0..<Self.entryCount {
            let expected = index < Self.damagedCount ? nil : Self.value(index)
            #expect(reader[Self.key(index)] == expected, "\(Self.key(index))")
        }
        // Every damaged file is gone, whatever it was; nothing outside the container was touched.
        for path in damagedPaths { #expect(!RawFiles.exists(path), "\(path) is still there") }
        for (copy, bytes) in untouchedCopies { #expect(try RawFiles.read(copy) == bytes) }
        #expect(reader.diskCount == Self.entryCount - Self.damagedCount)
        #expect(folder.entryFiles().count == Self.entryCount - Self.damagedCount)
        let warnings = TestLog.messages(containing: folder.container().path).filter { $0.level == .warning }
        #expect(warnings.count >= Self.damagedCount)

        // Usable afterwards: the damaged keys take new values, which survive a restart.
        for index in 0..<Self.damagedCount { reader[Self.key(index)] = "fresh \(index)" }
        await reader.flush()
        reader.clearMemory()
        for index in 0..<Self.damagedCount { #expect(reader[Self.key(index)] == "fresh \(index)") }
        let restarted = try folder.stringBuilder().build(sharingStore: false)
        #expect(restarted.diskCount == Self.entryCount)
        for index in 0..<Self.entryCount {
            #expect(restarted[Self.key(index)] == (index < Self.damagedCount ? "fresh \(index)" : Self.value(index)))
        }
        #expect(folder.entryFiles().count == Self.entryCount)
    }

    /// What is done to the saved index.
    enum IndexDamage: String, CaseIterable, Sendable {
        case deleted, zeroLength, garbage, truncated, flippedByte, directory, symlinkToOwnCopy
    }

    @Test(arguments: IndexDamage.allCases)
    func aDamagedIndexIsRebuiltFromTheEntryFiles(damage: IndexDamage) async throws {
        let folder = TemporaryDirectory()
        var random = SplitMix64(seed: UInt64(IndexDamage.allCases.firstIndex(of: damage)! + 100))
        do {
            let writer = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
            for index in 0..<Self.entryCount { writer[Self.key(index)] = Self.value(index) }
            await writer.flush()
        }
        let indexURL = folder.container().appendingPathComponent(ContainerFile.index)
        let goodIndex = try [UInt8](Data(contentsOf: indexURL))
        #expect(DiskIndexFile.entryCount(ofFile: goodIndex) == Self.entryCount)
        // Several independent variations of the damage, each found by a fresh cache.
        for round in 0..<(damage == .flippedByte || damage == .truncated || damage == .garbage ? 25 : 1) {
            try? FileManager.default.removeItem(at: indexURL)
            var bytes = goodIndex
            switch damage {
            case .deleted, .directory, .symlinkToOwnCopy: break
            case .zeroLength: bytes = []
            case .garbage:
                bytes = (0..<Int.random(in: 1...4_000, using: &random)).map { _ in
                    UInt8.random(in: 0...255, using: &random)
                }
                if round.isMultiple(of: 2) { bytes.replaceSubrange(0..<min(4, bytes.count), with: DiskIndexFile.magic) }
            case .truncated: bytes.removeLast(Int.random(in: 1...bytes.count - 1, using: &random))
            case .flippedByte:
                bytes[Int.random(in: 0..<bytes.count, using: &random)] ^= UInt8.random(in: 1...255, using: &random)
            }
            switch damage {
            case .deleted: break
            case .directory: try FileManager.default.createDirectory(at: indexURL, withIntermediateDirectories: false)
            case .symlinkToOwnCopy:
                let copy = folder.url.appendingPathComponent("index-copy")
                try RawFiles.write(goodIndex, to: copy.path)
                try FileManager.default.createSymbolicLink(at: indexURL, withDestinationURL: copy)
            default: try RawFiles.write(bytes, to: indexURL.path)
            }
            let cache = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
            #expect(cache.diskCount == Self.entryCount, "round \(round)")
            #expect(Set(cache.allKeys) == Set((0..<Self.entryCount).map(Self.key)), "round \(round)")
            for index in 0..<Self.entryCount { #expect(cache[Self.key(index)] == Self.value(index)) }
            // Usable: a change lands, and the next flush saves an intact index again.
            cache["new"] = "new value"
            await cache.flush()
            // Whatever was in the index's place, an intact index file is there now.
            #expect(RawFiles.kind(indexURL.path) == S_IFREG, "round \(round)")
            let saved = (try? RawFiles.read(indexURL.path)) ?? []
            #expect(DiskIndexFile.entryCount(ofFile: saved) == Self.entryCount + 1)
            if damage == .symlinkToOwnCopy {
                let copy = folder.url.appendingPathComponent("index-copy")
                #expect(try [UInt8](Data(contentsOf: copy)) == goodIndex)  // the link's target is untouched
                try FileManager.default.removeItem(at: copy)
            }
            cache.removeValue(forKey: "new")
            await cache.flush()
            try? FileManager.default.removeItem(at: indexURL)
        }
    }

    /// A process killed after entries were rewritten with larger values but before it wrote a new
    /// snapshot leaves the old snapshot and a journal of the rewrites: the journal's sizes must win.
    @Test func aJournalAfterAStaleSnapshotKeepsTheByteCountRight() async throws {
        let folder = TemporaryDirectory()
        let indexURL = folder.container().appendingPathComponent(ContainerFile.index)
        do {
            let cache = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
            for index in 0..<Self.entryCount { cache[Self.key(index)] = "small" }
            await cache.flush()
            for index in 0..<Self.entryCount { cache[Self.key(index)] = String(repeating: "large", count: 100) }
            let store = try #require(cache.disk)
            // The writes land without a flush: the journal holds them after the old snapshot.
            #expect(await waitUntil { store.withState { $0.pending.isEmpty } })
            let crashed = try Data(contentsOf: indexURL)
            #expect(crashed.count > DiskIndexFile.encode([]).count + Self.entryCount * 60)
            withExtendedLifetime(cache) {}
            // As if the process died before closing: the snapshot it writes when it closes is undone.
            try crashed.write(to: indexURL)
        }
        let reopened = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        #expect(reopened.diskCount == Self.entryCount)
        #expect(reopened.diskBytes == (try bytesOnDisk(folder)))
        for index in 0..<Self.entryCount {
            #expect(reopened[Self.key(index)] == String(repeating: "large", count: 100))
        }
    }

    // MARK: - Helpers

    private func entryPath(_ key: String, _ folder: TemporaryDirectory) -> String {
        folder.container().appendingPathComponent(DiskKey(key).fileName).path
    }

    private func bytesOnDisk(_ folder: TemporaryDirectory) throws -> Int {
        try folder.entryFiles().reduce(0) { total, name in
            let path = folder.container().appendingPathComponent(name).path
            return total + ((try FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue ?? 0)
        }
    }
}

extension DamageInjectionTests {
    /// A folder with something in it, in place of an entry file.
    @Test func aFolderWithContentInAnEntrysPlaceIsAMissAndTheKeyStaysUsable() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        cache["k"] = "genuine"
        await cache.flush()
        let entry = folder.container().appendingPathComponent(DiskKey("k").fileName)
        try FileManager.default.removeItem(at: entry)
        try FileManager.default.createDirectory(at: entry, withIntermediateDirectories: false)
        try RawFiles.write(Array("not ours".utf8), to: entry.appendingPathComponent("inside").path)
        #expect(cache["k"] == nil)
        cache["k"] = "rewritten"
        await cache.flush()
        #expect(cache["k"] == "rewritten")
        let reopened = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        #expect(reopened["k"] == "rewritten")
    }
}
