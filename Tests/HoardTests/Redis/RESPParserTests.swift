import Foundation
import Testing

@testable import HoardRedis

/// The RESP reply parser: every kind, any cut, and total on hostile input.
@Suite struct RESPParserTests {
    private func parse(_ text: String, limits: RESPLimits = RESPLimits()) throws(RESPParseError) -> [RESPValue] {
        var parser = RESPParser(limits: limits)
        var values: [RESPValue] = []
        try parser.parse(Array(text.utf8)) { values.append($0) }
        return values
    }

    @Test func everyKindParsesAndReEncodes() throws {
        let text =
            "+OK\r\n-ERR no\r\n:-42\r\n$3\r\na\r\n\r\n$-1\r\n*-1\r\n_\r\n#t\r\n,1.5\r\n(123456789012345678901\r\n"
            + "*2\r\n:1\r\n~1\r\n+x\r\n%1\r\n+k\r\n:2\r\n>1\r\n+p\r\n|1\r\n+a\r\n+b\r\n:7\r\n=7\r\ntxt:abc\r\n!3\r\nE x\r\n"
        let values = try parse(text)
        #expect(
            values.map(\.description) == [
                "+OK", "-ERR no", ":-42", "$3 bytes", "null", "null", "null", "true", ",1.5", "(123456789012345678901",
                "[:1, [+x]]", "%1 pairs", ">1 elements", ":7", "$3 bytes", "-E x",
            ]
        )
        #expect(values[3].bytes == Data("a\r\n".utf8))
        for value in values { #expect(try parse(String(decoding: value.encoded, as: UTF8.self)).count == 1) }
    }

    @Test func aStreamCutAnywhereGivesTheSameReplies() throws {
        let bytes = Array("*3\r\n$5\r\nhello\r\n:12\r\n%1\r\n+a\r\n$0\r\n\r\n+next\r\n".utf8)
        let whole = try parse(String(decoding: bytes, as: UTF8.self)).map(\.encoded)
        for step in 1...bytes.count {
            var parser = RESPParser()
            var values: [RESPValue] = []
            for start in stride(from: 0, to: bytes.count, by: step) {
                try parser.parse(Array(bytes[start..<min(start + step, bytes.count)])) { values.append($0) }
            }
            #expect(values.map(\.encoded) == whole, "pieces of \(step)")
            #expect(!parser.isInsideReply)
        }
    }

    @Test(arguments: [
        "?x\r\n", "+OK\n", ":1x\r\n", ":99999999999999999999\r\n", "$-2\r\n", "$3\r\nabcd\r\n", "*-3\r\n", "#x\r\n",
        ",abc\r\n", "(12a\r\n", "_x\r\n", "%-1\r\n", "$?\r\n", "\r\n",
    ])
    func malformedInputThrowsAndTheParserStaysFailed(text: String) {
        var parser = RESPParser()
        #expect(throws: RESPParseError.self) { try parser.parse(Array(text.utf8)) { _ in } }
        #expect(throws: RESPParseError.self) { try parser.parse(Array("+OK\r\n".utf8)) { _ in } }
    }

    @Test func repliesOverTheLimitsThrowBeforeAllocating() {
        var limits = RESPLimits()
        limits.maximumReplyCost = 1 << 20
        limits.maximumLineLength = 64
        limits.maximumDepth = 3
        for text in [
            "$2000000\r\n", "*100000000\r\n", "%9223372036854775807\r\n", "*1\r\n*1\r\n*1\r\n*1\r\n",
            "+" + String(repeating: "a", count: 100) + "\r\n",
        ] {
            #expect(throws: RESPParseError.self, "\(text.prefix(20))") { try parse(text, limits: limits) }
        }
        // The budget is per reply: many replies, each under it, pass.
        #expect(
            (try? parse(
                String(repeating: "$600000\r\n" + String(repeating: "x", count: 600_000) + "\r\n", count: 3),
                limits: limits
            ).count) == 3
        )
    }

    /// The fuzzer's seeds (Fuzz/corpus/resp) still parse; its edge cases do not (they throw, or
    /// stop inside a reply).
    @Test func fuzzSeedsParseUnlessTheyAreEdgeCases() throws {
        let folder = SanitizerFuzzCorpusTests.corpus.appendingPathComponent("resp", isDirectory: true)
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        #expect(names.count { !$0.hasPrefix("edge-") } >= 5)
        for name in names {
            let bytes = try [UInt8](Data(contentsOf: folder.appendingPathComponent(name)))
            var parser = RESPParser()
            var count = 0
            let parses = (try? parser.parse(bytes) { _ in count += 1 }) != nil && !parser.isInsideReply && count > 0
            #expect(parses == !name.hasPrefix("edge-"), "resp seed \(name)")
        }
    }
}
