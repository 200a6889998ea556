/// A pair of inverse functions between two types, used to store values of one type in a level of
/// another.
///
/// ```swift
/// let json = TwoWayTransformer<Data, User>(
///     transform: { data in try JSONDecoder().decode(User.self, from: data) },
///     inverseTransform: { user in try JSONEncoder().encode(user) }
/// )
/// let users = dataLevel.transformValues(json)
/// ```
public struct TwoWayTransformer<Input: Sendable, Output: Sendable>: Sendable {
    private let forward: @Sendable (Input) async throws -> Output
    private let backward: @Sendable (Output) async throws -> Input

    /// Creates a transformer from a function and its inverse.
    ///
    /// - Parameters:
    ///   - transform: Turns an input into an output; may throw.
    ///   - inverseTransform: Turns an output back into an input; may throw.
    public init(
        transform: @escaping @Sendable (Input) async throws -> Output,
        inverseTransform: @escaping @Sendable (Output) async throws -> Input
    ) {
        forward = transform
        backward = inverseTransform
    }

    /// Applies the transformation.
    ///
    /// - Parameter input: The value to transform.
    /// - Returns: The transformed value.
    /// - Throws: What the transformation throws.
    public func transform(_ input: Input) async throws -> Output {
        try await forward(input)
    }

    /// Applies the inverse transformation.
    ///
    /// - Parameter output: The value to transform back.
    /// - Returns: The input it came from.
    /// - Throws: What the inverse transformation throws.
    public func inverseTransform(_ output: Output) async throws -> Input {
        try await backward(output)
    }

    /// Returns a transformer that applies this one, then `next`, and inverts in the opposite order.
    ///
    /// - Parameter next: The transformer applied to this one's output.
    /// - Returns: The composed transformer.
    public func compose<Next: Sendable>(_ next: TwoWayTransformer<Output, Next>) -> TwoWayTransformer<Input, Next> {
        TwoWayTransformer<Input, Next>(
            transform: { input in try await next.transform(transform(input)) },
            inverseTransform: { output in try await inverseTransform(next.inverseTransform(output)) }
        )
    }

    /// Returns the transformer that goes the other way.
    ///
    /// - Returns: A transformer whose `transform` is this one's `inverseTransform`, and back.
    public func invert() -> TwoWayTransformer<Output, Input> {
        TwoWayTransformer<Output, Input>(transform: backward, inverseTransform: forward)
    }

    /// Returns a transformer that only transforms the values that satisfy the conditions.
    ///
    /// - Parameters:
    ///   - condition: Whether an input may be transformed.
    ///   - inverseCondition: Whether an output may be transformed back; by default, every output.
    /// - Returns: A transformer that throws ``CacheError`` with code `notFound` for the other values,
    ///   which makes a cache level a miss for them.
    public func conditioned(
        _ condition: @escaping @Sendable (Input) async throws -> Bool,
        inverseCondition: @escaping @Sendable (Output) async throws -> Bool = { _ in true }
    ) -> TwoWayTransformer<Input, Output> {
        TwoWayTransformer(
            transform: { input in
                guard try await condition(input) else { throw TransformFailure.conditionNotMet }
                return try await transform(input)
            },
            inverseTransform: { output in
                guard try await inverseCondition(output) else { throw TransformFailure.conditionNotMet }
                return try await inverseTransform(output)
            }
        )
    }
}
