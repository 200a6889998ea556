/// A function from one type to another, used to adapt the keys or the values of a cache level.
///
/// ```swift
/// let userKey = OneWayTransformer<User.ID, String> { id in "user-\(id)" }
/// let users = disk.transformKeys(userKey)
/// ```
/// A transformation that throws makes the level a miss for that call.
public struct OneWayTransformer<Input: Sendable, Output: Sendable>: Sendable {
    private let transformation: @Sendable (Input) async throws -> Output

    /// Creates a transformer from a function.
    ///
    /// - Parameter transform: Turns an input into an output; may throw.
    public init(_ transform: @escaping @Sendable (Input) async throws -> Output) {
        transformation = transform
    }

    /// Applies the transformation.
    ///
    /// - Parameter input: The value to transform.
    /// - Returns: The transformed value.
    /// - Throws: What the transformation throws.
    public func transform(_ input: Input) async throws -> Output {
        try await transformation(input)
    }

    /// Returns a transformer that applies this one, then `next`.
    ///
    /// - Parameter next: The transformer applied to this one's output.
    /// - Returns: The composed transformer.
    public func compose<Next: Sendable>(_ next: OneWayTransformer<Output, Next>) -> OneWayTransformer<Input, Next> {
        OneWayTransformer<Input, Next> { input in try await next.transform(transform(input)) }
    }

    /// Returns a transformer that only transforms the inputs that satisfy `condition`.
    ///
    /// - Parameter condition: Whether an input may be transformed.
    /// - Returns: A transformer that throws ``CacheError`` with code `notFound` for the other inputs,
    ///   which makes a cache level a miss for them.
    public func conditioned(
        _ condition: @escaping @Sendable (Input) async throws -> Bool
    ) -> OneWayTransformer<Input, Output> {
        OneWayTransformer { input in
            guard try await condition(input) else { throw TransformFailure.conditionNotMet }
            return try await transform(input)
        }
    }
}

/// The errors and the logging of the transformations that the adapters apply.
enum TransformFailure {
    /// The error a conditioned transformer throws for an input it skips.
    static let conditionNotMet = CacheError(
        code: .notFound,
        message: "The transformer's condition does not hold for this input."
    )

    /// Turns the error of a failed transformation into a miss, logging it; cancellation stays itself.
    ///
    /// - Parameters:
    ///   - error: What the transformation threw.
    ///   - what: What was being transformed, for the log.
    /// - Returns: `CancellationError` as it is, otherwise ``CacheError`` with code `notFound`
    ///   carrying `error`.
    static func miss(_ error: any Error, transforming what: String) -> any Error {
        if error is CancellationError { return error }
        HoardLogger.log(.debug, "Transforming \(what) failed, so the level misses: \(error)")
        return CacheError(
            code: .notFound,
            message: "Transforming \(what) failed, so the level misses: \(error)",
            underlyingError: error
        )
    }
}
