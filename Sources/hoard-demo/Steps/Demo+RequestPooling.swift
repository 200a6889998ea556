import Foundation
import Hoard

extension Demo {
    // MARK: 4

    /// Step 4: request pooling in `Cache`: concurrent callers for one key share one fetch.
    static func requestPooling(in folder: URL) async throws {
        section(4, "50 concurrent getOrFetch calls, one fetch")
        let network = SlowNetwork()
        let cache = try CacheBuilder<Article>()
            .containerName("pooling")
            .directory(folder)
            .fetcher { key in try await network.get(key) }
            .build()

        let titles = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<50 {
                group.addTask { try await cache.getOrFetch(forKey: "breaking-news").title }
            }
            var titles: [String] = []
            for try await title in group { titles.append(title) }
            return titles
        }
        explain(
            "\(titles.count) callers got \"\(titles[0])\" (all the same: \(Set(titles).count == 1))"
        )
        explain("fetcher calls: \(network.calls.count) — concurrent requests for one key share one fetch")
        await cache.flush()  // nothing left to write once the scratch folder goes
    }
}
