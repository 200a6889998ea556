import Testing

@testable import Hoard

/// Tests for `OneWayTransformer` and `TwoWayTransformer`.
@Suite struct TransformerTests {
    @Test func oneWayTransformsAndComposes() async throws {
        let double = OneWayTransformer<Int, Int> { $0 * 2 }
        let describe = OneWayTransformer<Int, String> { "n\($0)" }
        #expect(try await double.transform(4) == 8)
        #expect(try await double.compose(describe).transform(4) == "n8")
    }

    @Test func oneWayConditionedSkipsFailingInputs() async throws {
        let positive = OneWayTransformer<Int, Int> { $0 }.conditioned { $0 > 0 }
        #expect(try await positive.transform(3) == 3)
        await #expect(throws: CacheError.notFound) { try await positive.transform(-3) }
    }

    @Test func twoWayComposesAndInverts() async throws {
        let plusOne = TwoWayTransformer<Int, Int>(transform: { $0 + 1 }, inverseTransform: { $0 - 1 })
        let text = TwoWayTransformer<Int, String>(
            transform: { String($0) },
            inverseTransform: { string in
                guard let number = Int(string) else { throw TestFailure("not a number") }
                return number
            }
        )
        let composed = plusOne.compose(text)
        #expect(try await composed.transform(1) == "2")
        #expect(try await composed.inverseTransform("2") == 1)
        let inverted = composed.invert()
        #expect(try await inverted.transform("10") == 9)
        #expect(try await inverted.inverseTransform(9) == "10")
        await #expect(throws: TestFailure("not a number")) { try await inverted.transform("x") }
    }

    @Test func twoWayConditioned() async throws {
        let identity = TwoWayTransformer<Int, Int>(transform: { $0 }, inverseTransform: { $0 })
            .conditioned({ $0 < 10 }, inverseCondition: { $0 > 0 })
        #expect(try await identity.transform(5) == 5)
        #expect(try await identity.inverseTransform(5) == 5)
        await #expect(throws: CacheError.notFound) { try await identity.transform(10) }
        await #expect(throws: CacheError.notFound) { try await identity.inverseTransform(0) }
    }
}
