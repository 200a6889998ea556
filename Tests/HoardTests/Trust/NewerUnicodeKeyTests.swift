import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Keys made of characters newer than the normalization tables of Foundation.
///
/// Swift's `==` compares strings with the standard library's own Unicode data, which Swift 6.3 has
/// at Unicode 16: `"\u{16D67}\u{16D67}" == "\u{16D68}"` (Kirat Rai, added in Unicode 16). Foundation
/// on Linux normalizes with older tables, so its `precomposedStringWithCanonicalMapping` leaves the
/// decomposed spelling as it is. A canonical key made by Foundation then gives one key that `==`
/// treats as one, and that the memory level stores as one, two file names and two Redis keys.
@Suite(
    .enabled(if: "\u{16D68}" == "\u{16D67}\u{16D67}", "the runtime's Unicode data predates Unicode 16"),
    .timeLimit(.minutes(10)),
    .validatesCacheInvariants
)
struct NewerUnicodeKeyTests {
    init() { TestLog.install() }

    /// Spellings that Swift's `==` treats as one key, of characters Unicode 16 added.
    static let pairs: [(composed: String, decomposed: String)] = [
        ("\u{16D68}", "\u{16D67}\u{16D67}"),  // KIRAT RAI VOWEL SIGN AI = E + E
        ("x\u{105C9}y", "x\u{105D2}\u{307}y"),  // TODHRI LETTER EI = TODHRI LETTER I + dot above
    ]

    @Test func keysThatSwiftCallsEqualHaveOneCanonicalFormAndOneFileName() {
        for (composed, decomposed) in Self.pairs {
            #expect(composed == decomposed)
            let (first, second) = (composed.canonicalKey, decomposed.canonicalKey)
            #expect(
                Array(first.utf8) == Array(second.utf8),
                "\(KeyCorpusTests.describe(first)) vs \(KeyCorpusTests.describe(second))"
            )
            #expect(DiskKey(composed).fileName == DiskKey(decomposed).fileName)
        }
    }

    /// A removal under one spelling removes the file of the other: OnDisk.md says Swift treats
    /// `"\u{E9}"` and `"e\u{301}"` as one key, "and so do both levels".
    @Test func aRemovalUnderOneSpellingRemovesTheValueSavedUnderTheOther() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().maxRamCount(100).maxDiskCount(100).build()
        for (composed, decomposed) in Self.pairs {
            try await cache.save("removed", forKey: composed)
            cache.removeValue(forKey: decomposed)
            await cache.flush()
            #expect(cache[composed] == nil, "\(KeyCorpusTests.describe(composed)) survived its removal")
            #expect(cache[decomposed] == nil, "\(KeyCorpusTests.describe(decomposed)) survived its removal")
        }
        #expect(cache.diskCount == 0)
        #expect(folder.entryFiles().isEmpty)
    }

    @Test func aWriteUnderOneSpellingReplacesTheValueOnDiskUnderTheOther() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().maxRamCount(100).maxDiskCount(100).build()
        for (composed, decomposed) in Self.pairs {
            try await cache.save("old", forKey: composed)
            try await cache.save("new", forKey: decomposed)
            #expect(cache[composed] == "new")
            cache.clearMemory()
            #expect(cache[composed] == "new", "\(KeyCorpusTests.describe(composed)) read a stale value from disk")
            #expect(cache[decomposed] == "new")
        }
        #expect(cache.diskCount == Self.pairs.count)
    }
}
