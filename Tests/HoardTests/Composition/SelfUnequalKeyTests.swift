import HoardTestSupport
import Testing

@testable import Hoard

/// Keys that are not equal to themselves (`Double.nan`): a batch or a pooled level cannot find their
/// repeats by `==`, and must still make every set and get of them as a loop of single calls would.
@Suite struct SelfUnequalKeyTests {
    /// A level of numbers stored under their description, where every `Double.nan` is one key.
    ///
    /// So a level that stores keys as strings or bytes makes it. Its set of the value `"first"` waits,
    /// five seconds at most, for the key to hold a value: made at once with a later set, `"first"`
    /// would land last.
    static func describingLevel(_ stored: Protected<[String: String]>) -> BasicCache<Double, String> {
        BasicCache(
            get: { key in
                guard let value = stored.withLock({ $0["\(key)"] }) else { throw CacheError.notFound }
                return value
            },
            set: { value, key in
                if value == "first" { _ = await waitUntil(seconds: 5) { stored.withLock { $0["\(key)"] != nil } } }
                stored.withLock { $0["\(key)"] = value }
            }
        )
    }

    /// A batch set of one `Double.nan` key makes its set.
    @Test func aBatchSetOfANaNKeySetsIt() async throws {
        let stored = Protected([String: String]())
        try await Self.describingLevel(stored).allBatch().set(["one", "two"], forKey: [.nan, 1])
        #expect(stored.withLock { $0 } == ["nan": "one", "1.0": "two"])
    }

    /// Two `Double.nan` keys in one batch set: the level stores them as one key, and keeps the later.
    @Test func aBatchSetOfTwoNaNKeysKeepsTheLaterValue() async throws {
        let stored = Protected([String: String]())
        try await Self.describingLevel(stored).allBatch().set(["first", "second"], forKey: [.nan, .nan])
        #expect(stored.withLock { $0 } == ["nan": "second"])
    }

    /// The same over a composite of two levels, one of which maps its keys (to themselves).
    @Test func aBatchSetOfTwoNaNKeysOverACompositeKeepsTheLaterValue() async throws {
        let stored = Protected([String: String]())
        let other = Protected([String: String]())
        let level = Self.describingLevel(stored)
            .compose(BasicCache<Double, String>.describing(other).transformKeys { (key: Double) in key })
        try await level.allBatch().set(["first", "second"], forKey: [.nan, .nan])
        #expect(stored.withLock { $0 } == ["nan": "second"])
        #expect(other.withLock { $0 } == ["nan": "second"])
    }

    /// A pooled get of a `Double.nan` key reaches the level and returns, plain or over a mapping.
    @Test(arguments: [false, true])
    func aPooledGetOfANaNKeyReturns(_ mapping: Bool) async throws {
        let stored = Protected(["nan": "value"])
        let plain = BasicCache<Double, String>.describing(stored)
        let level = mapping ? plain.transformKeys { (key: Double) in key }.pooled() : plain.pooled()
        let answer = Protected<String?>(nil)
        // Not awaited: a get that never returns would hold the test past any bound.
        Task {
            let value = (try? await level.get(.nan)) ?? "failed"; answer.withLock { $0 = value }
        }
        #expect(await waitUntil(seconds: 600) { answer.withLock { $0 } != nil })
        #expect(answer.withLock { $0 } == "value")
    }
}

extension BasicCache where Key == Double, Value == String {
    /// A level of numbers stored under their description, without waiting.
    fileprivate static func describing(_ stored: Protected<[String: String]>) -> BasicCache<Double, String> {
        BasicCache(
            get: { key in
                guard let value = stored.withLock({ $0["\(key)"] }) else { throw CacheError.notFound }
                return value
            },
            set: { value, key in stored.withLock { $0["\(key)"] = value } }
        )
    }
}
