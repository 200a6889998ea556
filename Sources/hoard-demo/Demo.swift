// hoard-demo — a guided tour of Hoard's object cache.
//
//     swift run hoard-demo
//
// Runs in a few seconds, needs no arguments and no network. Run it twice: the second run finds on
// disk the article that the first run fetched. Apart from that, every run prints the same text: no
// timings, no dates, no temporary paths, and events printed in the order they happened.
//
// This is a `@main` type rather than top-level code on purpose: in top-level `main.swift` code Swift
// picks the blocking (`noasync`) overload of `getOrFetch(forKey:)`, while here `try await` picks the
// async one.

import Foundation
import Hoard

@main
struct Demo {
    /// A folder for the demo's containers that survives between runs.
    static let demoDirectory = CacheBuilder<Article>.defaultDirectory
    /// The container of steps 1 and 2, kept so that the next run finds its article on disk.
    static let articlesFolder = demoDirectory.appendingPathComponent("articles", isDirectory: true)

    static func main() async throws {
        print("Hoard demo — a memory + disk object cache with fetching")
        print("Containers live in \(displayPath(demoDirectory))")

        try await persistentCache()
        try await evictionCallbacks()
        try await requestPooling()
        try await retriesAndErrors()
        try await callbackAndBlockingForms()
        try await freshnessBudgetsAndEvents()

        print("\nDone. Run `swift run hoard-demo` again: step 1 will find the article on disk.")
        print("To start over, delete \(displayPath(articlesFolder))")
    }
}
