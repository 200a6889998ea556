import Foundation
import Testing

@testable import Hoard

/// Tests for `transformKeys`, `transformValues`, `postProcess`, `conditionedPostProcess` and
/// `conditionedValueTransformation`.
@Suite struct TransformLevelTests {
    static let numberText = TwoWayTransformer<String, Int>(
        transform: { text in
            guard let number = Int(text) else { throw TestFailure("not a number") }
            return number
        },
        inverseTransform: { number in
            guard number >= 0 else { throw TestFailure("negative") }
            return String(number)
        }
    )

    @Test func transformKeysMapsEveryCall() async throws {
        let inner = RecordingLevel<String, Int>()
        let level = inner.transformKeys(OneWayTransformer<Int, String> { "key-\($0)" })
        try await level.set(1, forKey: 1)
        #expect(inner.values == ["key-1": 1])
        #expect(try await level.get(1) == 1)
        try await level.removeValue(forKey: 1)
        #expect(inner.values.isEmpty)
        await level.clear()
        #expect(inner.clears == 1)
    }

    @Test func failingKeyTransformIsAMissNotACrash() async throws {
        let inner = RecordingLevel<String, Int>(["x": 1])
        let level = inner.transformKeys { (key: Int) -> String in
            guard key > 0 else { throw TestFailure("bad key") }
            return "x"
        }
        #expect(try await level.get(1) == 1)
        let error = await #expect(throws: CacheError.notFound) { try await level.get(-1) }
        #expect(error?.underlyingError is TestFailure)
        await #expect(throws: TestFailure("bad key")) { try await level.set(2, forKey: -1) }
        try await level.removeValue(forKey: -1)
        #expect(inner.gets == 1)
        #expect(inner.sets == 0 && inner.removes == 0)
    }

    @Test func failingKeyTransformMakesOnlyThatLevelMiss() async throws {
        let front = RecordingLevel<String, Int>().transformKeys { (key: String) -> String in
            throw TestFailure("front cannot take \(key)")
        }
        let back = RecordingLevel<String, Int>(["k": 5])
        #expect(try await front.compose(back).get("k") == 5)
    }

    @Test func transformValuesBothWays() async throws {
        let inner = RecordingLevel<String, String>(["k": "12"])
        let level = inner.transformValues(Self.numberText)
        #expect(try await level.get("k") == 12)
        try await level.set(7, forKey: "n")
        #expect(inner.values["n"] == "7")
    }

    @Test func failingValueTransformIsAMissOnGetAndAnErrorOnSet() async throws {
        let inner = RecordingLevel<String, String>(["k": "twelve"])
        let level = inner.transformValues(Self.numberText)
        await #expect(throws: CacheError.notFound) { try await level.get("k") }
        await #expect(throws: TestFailure("negative")) { try await level.set(-1, forKey: "n") }
        #expect(inner.values["n"] == nil)
    }

    @Test func postProcessTransformsWhatGetReturns() async throws {
        let inner = RecordingLevel<String, Int>(["k": 2])
        let level = inner.postProcess(OneWayTransformer { $0 * 10 })
        #expect(try await level.get("k") == 20)
        try await level.set(3, forKey: "n")
        #expect(inner.values["n"] == 3)
        let failing = inner.postProcess(OneWayTransformer { _ in throw TestFailure() })
        await #expect(throws: CacheError.notFound) { try await failing.get("k") }
    }

    @Test func conditionedPostProcessSeesTheKey() async throws {
        let inner = RecordingLevel<String, Int>(["double": 2, "keep": 2])
        let level = inner.conditionedPostProcess { key, value in key == "double" ? value * 2 : value }
        #expect(try await level.get("double") == 4)
        #expect(try await level.get("keep") == 2)
    }

    @Test func conditionedValueTransformationSeesTheKey() async throws {
        let inner = RecordingLevel<String, String>()
        let level = inner.conditionedValueTransformation(
            transform: { key, value in Int(value.dropFirst(key.count + 1)) ?? -1 },
            inverseTransform: { key, value in "\(key):\(value)" }
        )
        try await level.set(5, forKey: "a")
        #expect(inner.values["a"] == "a:5")
        #expect(try await level.get("a") == 5)
    }

    @Test func cancellationInATransformStaysCancellation() async throws {
        let inner = RecordingLevel<String, Int>(["k": 1])
        let level = inner.transformKeys { (key: String) -> String in
            throw CancellationError()
        }
        await #expect(throws: CancellationError.self) { try await level.get("k") }
    }
}
