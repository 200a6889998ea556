// hoard-demo — a guided tour of Hoard's object cache.
//
//     swift run hoard-demo
//
// Runs in a few seconds, needs no arguments and no network. Run it twice: the second run finds on
// disk the article that the first run fetched. Apart from that, every run prints the same text: no
// timings, no dates, no temporary paths, and events printed in the order they happened.
//
// It leaves one folder: the `articles` container in Hoard's default folder (`~/.cache/hoard-demo/Hoard` on
// Linux). The other steps' containers live in a temporary folder, removed before the demo ends.

import Foundation
import Hoard

@main
struct Demo {
    /// Hoard's default folder, which holds the one container the demo keeps.
    static let demoDirectory = CacheBuilder<Article>.defaultDirectory
    /// The container of steps 1 and 2, kept so that the next run finds its article on disk.
    static let articlesFolder = demoDirectory.appendingPathComponent("articles", isDirectory: true)

    static func main() async throws {
        print("Hoard demo — a memory + disk object cache with fetching")
        print("The articles container lives in \(displayPath(demoDirectory)); the other steps use a temporary folder.")

        try await persistentCache()

        let scratch = try ScratchFolder()
        do {
            try await evictionCallbacks(in: scratch.url)
            try await requestPooling(in: scratch.url)
            try await retriesAndErrors(in: scratch.url)
            try await callbackAndBlockingForms(in: scratch.url)
            try await freshnessBudgetsAndEvents(in: scratch.url)
            try await composition(in: scratch.url)
        } catch {
            try? scratch.remove()
            throw error
        }
        try scratch.remove()

        print("\nDone. The temporary folder is removed; the demo leaves only \(displayPath(articlesFolder)).")
        print("Run `swift run hoard-demo` again: step 1 will find the article on disk.")
        print("To start over, delete \(displayPath(articlesFolder))")
    }
}
