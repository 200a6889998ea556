import Foundation
import Hoard

extension Demo {
    // MARK: 8

    /// Step 8: the levels under `Cache`, composed by hand: memory over disk over the network, with a
    /// domain type as the key and pooled gets.
    static func composition(in folder: URL) async throws {
        section(8, "Composing levels: memory.compose(disk).compose(network)")
        let trace = LevelTrace()
        let network = SlowNetwork()
        let disk = DiskCacheLevel<String, Article>(
            directory: folder.appendingPathComponent("composition", isDirectory: true),
            capacity: 100
        )
        // Each level is traced, to show which one answers; without that, it reads as in the Composing Levels article.
        func articles(memory: MemoryCacheLevel<String, Article>) -> BasicCache<ArticleID, Article> {
            memory.traced(as: "memory", into: trace)
                .compose(disk.traced(as: "disk", into: trace))
                .compose(network.traced(as: "network", into: trace))
                .transformKeys { (id: ArticleID) in "article-\(id.number)" }
                .pooled()
        }
        explain("let articles = memory.compose(disk).compose(network)  // a SlowNetwork: Fetcher")
        explain("    .transformKeys { (id: ArticleID) in \"article-\\(id.number)\" }")
        explain("    .pooled()")
        let levels = articles(memory: MemoryCacheLevel(capacity: 100))

        explain("a) get(ArticleID(7)): memory and disk miss, the network answers, and both levels keep it:")
        _ = try await levels.get(ArticleID(number: 7))
        trace.printAndClear()

        explain("b) the same get again: memory answers, and nothing behind it is asked:")
        _ = try await levels.get(ArticleID(number: 7))
        trace.printAndClear()

        explain("c) a new, empty memory level over the same disk, as after a relaunch: disk answers:")
        let relaunched = articles(memory: MemoryCacheLevel(capacity: 100))
        _ = try await relaunched.get(ArticleID(number: 7))
        trace.printAndClear()

        explain("d) 10 concurrent gets of ArticleID(8): pooled() makes them share one get of the levels:")
        let callsBefore = network.calls.count
        let titles = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<10 {
                group.addTask { try await relaunched.get(ArticleID(number: 8)).title }
            }
            var titles: [String] = []
            for try await title in group { titles.append(title) }
            return titles
        }
        trace.clear()  // one pass through the levels, and memory hits for any caller that came late
        explain(
            "→ \(titles.count) callers got \"\(titles[0])\" (all the same: \(Set(titles).count == 1)); "
                + "network calls: \(network.calls.count - callsBefore)"
        )
        await disk.flush()  // nothing left to write once the scratch folder goes
    }
}
