import Foundation
import Testing

@testable import Hoard

/// The fuzzers' seed corpus (Fuzz/corpus) still matches the formats.
///
/// Its valid seeds decode and its edge cases do not. A format change that leaves the seeds behind
/// fails here, not silently in the fuzzer (which would then start from noise). Regenerate the seeds
/// with `bash Fuzz/run.sh --make-seeds`.
@Suite struct SanitizerFuzzCorpusTests {
    static let corpus = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz/corpus", isDirectory: true)

    static func seeds(_ kind: String) throws -> [(name: String, bytes: [UInt8])] {
        let folder = corpus.appendingPathComponent(kind, isDirectory: true)
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        return try names.map { ($0, try [UInt8](Data(contentsOf: folder.appendingPathComponent($0)))) }
    }

    @Test func entrySeedsDecodeUnlessTheyAreEdgeCases() throws {
        let seeds = try Self.seeds("entry")
        #expect(seeds.count { !$0.name.hasPrefix("edge-") } >= 3)
        for seed in seeds {
            let decodes = (try? EntryFormat.decode(seed.bytes)) != nil
            #expect(decodes == !seed.name.hasPrefix("edge-"), "entry seed \(seed.name)")
        }
    }

    @Test func indexSeedsDecodeUnlessTheyAreEdgeCases() throws {
        let seeds = try Self.seeds("index")
        #expect(seeds.count { !$0.name.hasPrefix("edge-") } >= 3)
        for seed in seeds {
            let decodes = seed.bytes.withUnsafeBytes { DiskIndexFile.decode($0) } != nil
            #expect(decodes == !seed.name.hasPrefix("edge-"), "index seed \(seed.name)")
        }
    }

    @Test func journalSeedsReadCleanlyUnlessTheyAreEdgeCases() throws {
        let seeds = try Self.seeds("journal")
        #expect(seeds.count { !$0.name.hasPrefix("edge-") } >= 3)
        for seed in seeds {
            let ending = seed.bytes.withUnsafeBytes { bytes in
                let start = DiskIndexFile.decodeSnapshot(bytes)?.end ?? 0
                return DiskJournal.decode(UnsafeRawBufferPointer(rebasing: bytes[start...])).ending
            }
            #expect((ending == .clean) == !seed.name.hasPrefix("edge-"), "journal seed \(seed.name)")
        }
    }
}
