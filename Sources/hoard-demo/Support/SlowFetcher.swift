/// A slow fetcher: pretends to download an article in about 200 ms, counting its calls.
///
/// The latency stands for a network; it lets concurrent callers overlap. The demo never prints how
/// long anything took, so that every run prints the same text.
func slowFetcher(counting calls: Counter) -> @Sendable (String) async throws -> Article {
    { key in
        calls.increment()
        try await Task.sleep(for: .milliseconds(200))  // simulated network latency
        return Article(id: key, title: "All about \(key)")
    }
}
