import Testing

@testable import Hoard

@Suite struct CacheErrorTests {
    @Test func errorsMatchByCode() {
        let error: any Error = CacheError.fetchFailed(key: "k", attempts: 2, underlying: TestFailure())
        #expect(CacheError.fetchFailed(key: "x", attempts: 1, underlying: TestFailure()) ~= error)
        #expect(!(CacheError.notFound ~= error))
        #expect(CacheError.notFound(key: "a") == CacheError.notFound)
        #expect(CacheError.notFound != CacheError.invalidConfiguration("x"))
        #expect(CacheError.invalidConfiguration("x") == CacheError.invalidConfiguration)
        switch error {
        case CacheError.fetchFailed: break
        default: Issue.record("catch-style matching by code failed")
        }
        let description = String(describing: error)
        #expect(description.contains("fetchFailed") && description.contains("\"k\"") && description.contains("2"))
    }

    @Test func posixErrorsNameTheCallThePathAndTheReason() {
        let error = CacheError.FileError(operation: "open", path: "/x/y", errorNumber: 2)
        #expect(error.description.contains("open(/x/y)"))
        #expect(error.description.contains("errno 2"))
    }
}
