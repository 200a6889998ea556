import Testing

@testable import Hoard

/// A trait that checks the invariants of every cache a test builds, when the cache is released.
///
/// It checks memory links and counts, the disk index against the files, no temporary file left,
/// and the limits once no write is pending (see `Cache.invariantViolations()`). Each violation is
/// recorded as an issue of the test.
struct ValidatesCacheInvariants: TestTrait, SuiteTrait, TestScoping {
    var isRecursive: Bool { true }

    func provideScope(
        for test: Test,
        testCase: Test.Case?,
        performing function: @Sendable () async throws -> Void
    ) async throws {
        // Only around each test case: a suite-level scope would mix the caches of every test.
        guard testCase != nil else { return try await function() }
        let registry = CacheRegistry()
        try await CacheRegistry.$current.withValue(registry) { try await function() }
        for problem in registry.results.problems {
            Issue.record("A cache was released with its invariants violated: \(problem)")
        }
    }
}

extension Trait where Self == ValidatesCacheInvariants {
    /// Checks every cache's invariants when it is released (see ``ValidatesCacheInvariants``).
    static var validatesCacheInvariants: Self { Self() }
}
