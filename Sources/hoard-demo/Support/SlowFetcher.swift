import Foundation

/// A slow fetcher: pretends to download an article in about 200 ms, counting its calls.
func slowFetcher(counting calls: Counter) -> @Sendable (String) async throws -> Article {
    { key in
        calls.increment()
        try await Task.sleep(for: .milliseconds(200))  // simulated network latency
        return Article(id: key, title: "All about \(key)", fetchedAt: Date())
    }
}
