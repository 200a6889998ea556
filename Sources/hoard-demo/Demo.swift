// hoard-demo — a guided tour of Hoard's object cache.
//
//     swift run hoard-demo
//
// Runs in a few seconds, needs no arguments and no network. Run it twice: the second run finds on
// disk the article that the first run fetched.
//
// This is a `@main` type rather than top-level code on purpose: in top-level `main.swift` code Swift
// picks the blocking (`noasync`) overload of `getOrFetch(forKey:)`, while here `try await` picks the
// async one.

import Foundation
import Hoard

// MARK: - The walkthrough

@main
struct Demo {
    static func main() async throws {
        print("Hoard demo — a memory + disk object cache with fetching")
        print("Containers live in \(demoDirectory.path)")

        try await persistentCacheAndTimings()
        try await evictionCallbacks()
        try await requestPooling()
        try await retriesAndErrors()
        try await callbackAndBlockingForms()
        try await freshnessBudgetsAndEvents()

        print("\nDone. Run `swift run hoard-demo` again: step 2 will find the article on disk.")
        print("To start over, delete \(demoDirectory.appendingPathComponent("articles").path)")
    }
}
