import HoardTestSupport
import Testing

@testable import Hoard

/// Key mappings that send two keys to one (`transformKeys { $0.lowercased() }`): the two are one key
/// for the batches built over them, as they are for the level below.
@Suite struct MergedKeyTests {
    /// A level of strings whose set of the value `"first"` waits until the key holds a value: had
    /// `"first"` and a later value been set at once, `"first"` would land last.
    static func slowFirstLevel(_ stored: Protected<[String: String]>) -> BasicCache<String, String> {
        BasicCache(
            get: { key in
                guard let value = stored.withLock({ $0[key] }) else { throw CacheError.notFound }
                return value
            },
            set: { value, key in
                if value == "first" { _ = await waitUntil { stored.withLock { $0[key] != nil } } }
                stored.withLock { $0[key] = value }
            }
        )
    }

    /// Two keys that map to one, in one batch set: the later value is the one kept, as a loop of sets
    /// would leave it.
    @Test func aBatchSetOfTwoKeysThatMapToOneKeepsTheLaterValue() async throws {
        let stored = Protected([String: String]())
        let level = Self.slowFirstLevel(stored).transformKeys { (key: String) in key.lowercased() }
        try await level.allBatch().set(["first", "second"], forKey: ["Foo", "foo"])
        #expect(stored.withLock { $0 } == ["foo": "second"])
        #expect(try await level.get("FOO") == "second")
    }

    /// The same through two mappings and a value transformation: each keeps the keys one.
    @Test func keysMergedTwoLevelsDownAreOneKeyForABatchSet() async throws {
        let stored = Protected([String: String]())
        let level = Self.slowFirstLevel(stored)
            .transformKeys { (key: String) in key.lowercased() }
            .transformKeys { (number: Int) in number.isMultiple(of: 2) ? "EVEN" : "Odd" }
            .transformValues(TwoWayTransformer<String, String>(transform: { $0 }, inverseTransform: { $0 }))
        try await level.allBatch().set(["first", "other", "second"], forKey: [2, 3, 4])
        #expect(stored.withLock { $0 } == ["even": "second", "odd": "other"])
    }

    /// Keys the mapping keeps apart are all set, and a key it cannot map fails the batch as its set
    /// would, without holding back the others.
    @Test func aBatchSetWithAKeyThatDoesNotMapSetsTheOthersAndThrows() async throws {
        let inner = RecordingLevel<String, Int>()
        let level = inner.transformKeys { (key: String) -> String in
            guard !key.isEmpty else { throw TestFailure("empty key") }
            return key.lowercased()
        }
        await #expect(throws: TestFailure("empty key")) {
            try await level.allBatch().set([1, 2, 3, 4], forKey: ["A", "", "b", "a"])
        }
        #expect(inner.values == ["a": 4, "b": 3])
    }
}
