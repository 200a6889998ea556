@testable import Hoard

/// Calls the blocking `getOrFetch` from synchronous code.
func blockingGet(_ cache: Cache<String>, _ key: String) throws -> String {
    try cache.getOrFetchAndWait(forKey: key)
}
