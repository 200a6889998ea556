import Hoard

/// The demo's pretend network: a `Fetcher` that takes about 200 ms to "download" an article, and
/// counts its calls.
///
/// A `Fetcher` only writes `get`; it can sit at the bottom of a composition, or feed a `Cache`
/// through the builder's `.fetcher { … }`. The latency stands for a network and lets concurrent
/// callers overlap. The demo never prints how long anything took, so that every run prints the same
/// text.
struct SlowNetwork: Fetcher {
    /// How many times ``get(_:)`` was called.
    let calls = Counter()

    /// Returns a made-up article for any key, after a simulated network delay.
    ///
    /// - Parameter key: The article's identifier.
    /// - Returns: An article titled after the key.
    /// - Throws: `CancellationError` when the task is cancelled during the delay.
    func get(_ key: String) async throws -> Article {
        calls.increment()
        try await Task.sleep(for: .milliseconds(200))  // simulated network latency
        return Article(id: key, title: "All about \(key)")
    }
}
