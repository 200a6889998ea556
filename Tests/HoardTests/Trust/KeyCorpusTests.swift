import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// A corpus of well over 200 hostile, strange and random keys.
///
/// Every key is set, read (from memory, from disk, after a restart), listed and removed. No file
/// appears outside the container, two different keys never share a file, and the two levels agree
/// on what one key is: canonically equivalent spellings (which Swift's `==` treats as one string)
/// are one key in memory and on disk, and nothing else is.
@Suite(.timeLimit(.minutes(10)), .validatesCacheInvariants)
struct KeyCorpusTests {
    init() { TestLog.install() }

    /// Keys known to break naive caches (paths, empty and huge keys, control characters) and their relatives.
    static let namedKeys: [String] = {
        var keys = [
            "", ".", "..", "...", "../../x", "../../../../../../x", "./x", "x/..", "/", "//", "/x", "/etc/passwd",
            "/tmp", "C:\\Windows\\System32", "\\\\server\\share", "~", "~/x", "-rf", "*", "?", "a/b/c", "a\\b",
            "CON", "NUL", "aux.txt", " ", "  ", "\t", "\n", "\r\n", " x ", "Key", "key", "KEY",
            String(repeating: "x", count: 10_000), String(repeating: "\u{E9}", count: 10_000),
            "\0", "\0\0", "a\0b", "a\0c", "\0a", "\u{7F}", "\u{85}", "\u{2028}", "\u{FEFF}", "\u{200B}", "\u{FFFD}",
            "%00", "%2e%2e%2f", "%2F", "%", "%%", "%zz", "\\u{0}", "\\x00", "\\0", "&#0;", "&amp;", "\\", "\\n",
            "${HOME}", "$(rm -rf /)", "`id`", "'", "\"", "<script>", "{}", "[]", "null", "nil",
            "🦄", "🦄🔥", "👨‍👩‍👧‍👦", "👨‍👩‍👧", "🇫🇷", "🏳️‍🌈", "👍🏽", "👍", "\u{1F600}\u{FE0F}",
            "שלום", "مرحبا", "\u{202E}evil.exe", "\u{200F}x", "a\u{202E}b\u{202C}c", "日本語のキー", "한국어",
            "\u{301}", "e\u{301}\u{301}", "\u{10FFFF}", "\u{E000}", "\u{D7FF}", "\u{FB01}", "fi",
            ".hoard-index", ".hoard-tmp-1-1", ".hoard-tmp-\(getpid())-1", "test", "..hoard-index",
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            DiskKey("a").fileName, DiskKey("").fileName, DiskKey("a").fileName.uppercased(),
        ]
        keys += (0..<32).map { String(UnicodeScalar(UInt8($0))) }  // every C0 control character
        return keys
    }()

    /// Spellings that Swift's `==` treats as one key: each group must be one entry.
    static let equivalentSpellings: [[String]] = [
        ["caf\u{E9}", "cafe\u{301}"],
        ["\u{E9}", "e\u{301}"],
        ["\u{C5}", "A\u{30A}", "\u{212B}"],
        ["\u{3A9}", "\u{2126}"],
        ["\u{AC00}", "\u{1100}\u{1161}"],
        ["q\u{307}\u{323}", "q\u{323}\u{307}"],
        ["\u{1E69}", "s\u{323}\u{307}", "s\u{307}\u{323}", "\u{1E61}\u{323}", "\u{1E63}\u{307}"],
        ["\u{F4}\u{301}", "o\u{302}\u{301}", "\u{1ED1}"],
        [String(repeating: "\u{E9}", count: 300), String(repeating: "e\u{301}", count: 300)],
        ["../caf\u{E9}/..", "../cafe\u{301}/.."],
        ["\u{E9}\0\u{E9}", "e\u{301}\0e\u{301}"],
    ]

    /// 100 random strings: Unicode from several blocks (combining marks included), and binary-looking
    /// strings whose characters are arbitrary bytes.
    static let randomKeys: [String] = {
        var random = SplitMix64(seed: 0x6b_6579)
        let blocks: [ClosedRange<UInt32>] = [
            0x0...0x7F, 0x80...0xFF, 0x300...0x36F, 0x370...0x3FF, 0x590...0x6FF, 0x1100...0x11FF,
            0xAC00...0xD7A3, 0x4E00...0x9FFF, 0x1F300...0x1FAFF, 0x10000...0x10FFFF, 0xE000...0xF8FF,
        ]
        var keys: [String] = []
        for index in 0..<100 {
            var scalars = String.UnicodeScalarView()
            for _ in 0..<Int.random(in: 1...24, using: &random) {
                if index.isMultiple(of: 4) {
                    scalars.append(Unicode.Scalar(UInt8.random(in: 0...255, using: &random)))
                } else {
                    let block = blocks[Int.random(in: 0..<blocks.count, using: &random)]
                    if let scalar = Unicode.Scalar(UInt32.random(in: block, using: &random)) { scalars.append(scalar) }
                }
            }
            keys.append(String(scalars))
        }
        return keys
    }()

    /// The whole corpus, with the decomposed (NFD) and composed (NFC) spelling of every random key.
    static let corpus: [String] = {
        let variants = randomKeys.flatMap {
            [$0.decomposedStringWithCanonicalMapping, $0.precomposedStringWithCanonicalMapping]
        }
        return namedKeys + equivalentSpellings.flatMap { $0 } + randomKeys + variants
    }()

    /// The corpus in classes of keys that Swift's `==` treats as one, in first-seen order.
    static let classes: [[String]] = {
        var classes: [[String]] = []
        var indexByKey: [String: Int] = [:]
        for key in corpus {
            if let index = indexByKey[key] {
                classes[index].append(key)
            } else {
                indexByKey[key] = classes.count
                classes.append([key])
            }
        }
        return classes
    }()

    @Test func theCorpusIsLargeAndHasEquivalentSpellings() {
        #expect(Self.corpus.count >= 200)
        #expect(Self.classes.count >= 200)
        #expect(
            Self.classes.filter { Set($0.map { Array($0.unicodeScalars) }).count > 1 }.count
                >= Self.equivalentSpellings.count
        )
        for group in Self.equivalentSpellings {
            #expect(Set(group).count == 1, "\(group.map { $0.unicodeScalars.map { String($0.value, radix: 16) } })")
        }
    }

    /// Two keys share a file name exactly when Swift's `==` says they are one key.
    @Test func fileNamesCollideExactlyForEqualKeys() {
        let names = Self.corpus.map { DiskKey($0).fileName }
        var problems: [String] = []
        for first in Self.corpus.indices {
            for second in Self.corpus.indices where first < second {
                let sameKey = Self.corpus[first] == Self.corpus[second]
                if sameKey != (names[first] == names[second]) {
                    problems.append("\(Self.describe(Self.corpus[first])) vs \(Self.describe(Self.corpus[second]))")
                }
            }
        }
        #expect(problems.isEmpty, "\(problems.prefix(10))")
        #expect(names.allSatisfy(ContainerFile.isEntryName))
    }

    enum Levels: String, CaseIterable, Sendable {
        case memoryAndDisk, diskOnly
    }

    @Test(arguments: Levels.allCases)
    func everyKeyRoundTripsStaysInsideAndIsOneKeyInBothLevels(levels: Levels) async throws {
        let folder = TemporaryDirectory()
        // Deep enough that "../../x" and friends, if they were ever paths, would land inside the folder.
        let directory = folder.url.appendingPathComponent("d1/d2/d3", isDirectory: true)
        let absoluteKeys = [
            folder.url.path + "/escaped", directory.path + "/escaped", directory.path + "/test/../escaped",
        ]
        let classes = Self.classes + absoluteKeys.map { [$0] }
        func build(sharingStore: Bool = true) throws -> Cache<String> {
            try CacheBuilder<String>(serializer: StringSerializer()).containerName("test").directory(directory)
                .maxRamCount(levels == .diskOnly ? 0 : 1_000).maxDiskCount(1_000).build(sharingStore: sharingStore)
        }
        let cache = try build()
        // Set through the last spelling; read through every spelling.
        for (index, spellings) in classes.enumerated() { cache[spellings.last!] = "value \(index)" }
        for (index, spellings) in classes.enumerated() {
            for key in spellings { #expect(cache[key] == "value \(index)", "\(Self.describe(key))") }
        }
        await cache.flush()
        cache.clearMemory()
        for (index, spellings) in classes.enumerated() {
            for key in spellings { #expect(cache[key] == "value \(index)", "from disk: \(Self.describe(key))") }
        }
        #expect(cache.diskCount == classes.count)
        #expect(Set(cache.allKeys).count == classes.count)
        for (index, spellings) in classes.enumerated() where !cache.contains(spellings[0]) {
            Issue.record("contains misses class \(index)")
        }

        // Only the container's own files exist below the folder.
        let container = "d1/d2/d3/test"
        let expected = Set(
            [
                "d1", "d1/d2", "d1/d2/d3", container, container + "/" + ContainerFile.index,
                container + "/" + ContainerFile.lock, container + "/" + ContainerFile.manifest,
            ]
                + folder.entryFiles(in: "d1/d2/d3/test").map { container + "/" + $0 }
        )
        #expect(Set(folder.allPaths()) == expected)
        #expect(folder.entryFiles(in: "d1/d2/d3/test").count == classes.count)

        // A restart finds every key, under every spelling, and lists each once as it was set.
        do {
            let restarted = try build(sharingStore: false)
            for (index, spellings) in classes.enumerated() {
                for key in spellings {
                    #expect(restarted[key] == "value \(index)", "after a restart: \(Self.describe(key))")
                }
            }
            let listed = restarted.allKeys
            #expect(listed.count == classes.count)
            #expect(Set(listed) == Set(classes.map { $0.last! }))
        }

        // Removing through the first spelling removes the key under every spelling.
        for spellings in classes { cache.removeValue(forKey: spellings.first!) }
        for spellings in classes {
            for key in spellings { #expect(cache[key] == nil, "\(Self.describe(key)) survived its removal") }
        }
        await cache.flush()
        #expect(folder.entryFiles(in: "d1/d2/d3/test").isEmpty)
        #expect(try build(sharingStore: false).diskCount == 0)
        #expect(
            Set(folder.allPaths()) == [
                "d1", "d1/d2", "d1/d2/d3", container, container + "/" + ContainerFile.index,
                container + "/" + ContainerFile.lock, container + "/" + ContainerFile.manifest,
            ]
        )
    }

    /// A memory-only cache and a disk-only cache give the same answer for every spelling.
    @Test func memoryOnlyAndDiskOnlyCachesAgree() async throws {
        let folder = TemporaryDirectory()
        let memoryOnly = try folder.stringBuilder("memory").maxDiskCount(0).maxRamCount(1_000).build()
        let diskOnly = try folder.stringBuilder("disk").maxRamCount(0).maxDiskCount(1_000).build()
        // Each class is set through one spelling chosen at random, the same for both caches.
        var random = SplitMix64(seed: 3)
        for (index, spellings) in Self.classes.enumerated() {
            let spelling = spellings[Int.random(in: 0..<spellings.count, using: &random)]
            memoryOnly[spelling] = "value \(index)"
            diskOnly[spelling] = "value \(index)"
        }
        await diskOnly.flush()
        for spellings in Self.classes {
            for key in spellings { #expect(memoryOnly[key] == diskOnly[key], "\(Self.describe(key))") }
        }
        #expect(memoryOnly.memoryCount == diskOnly.diskCount)
    }

    /// A key's scalars in hex, for messages (keys themselves may be invisible or 10 000 long).
    static func describe(_ key: String) -> String {
        let scalars = key.unicodeScalars.prefix(12).map { String($0.value, radix: 16) }.joined(separator: " ")
        return "[\(scalars)\(key.unicodeScalars.count > 12 ? " … (\(key.unicodeScalars.count) scalars)" : "")]"
    }
}
