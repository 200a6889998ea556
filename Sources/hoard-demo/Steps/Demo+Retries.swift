import Foundation
import Hoard

extension Demo {
    // MARK: 5

    /// Step 5: retries with a backoff, the error when every attempt fails, and a delegate fallback.
    static func retriesAndErrors(in folder: URL) async throws {
        section(5, "Retries, CacheError and a delegate fallback")
        // Hoard is silent by default; its logger reports each retry. Turned on for this step only.
        HoardLogger.output = { message, level in
            if level >= .info { print("     [hoard \(level)] \(message)") }
        }
        defer { HoardLogger.output = nil }

        // a) Fails twice, then succeeds.
        let attempts = Counter()
        let flaky = try CacheBuilder<Article>()
            .containerName("retries")
            .directory(folder)
            .fetcher { key in
                let attempt = attempts.increment()
                if attempt <= 2 {
                    print("   fetcher attempt \(attempt): failing")
                    throw NetworkError(attempt: attempt)
                }
                print("   fetcher attempt \(attempt): succeeding")
                return Article(id: key, title: "Third time lucky")
            }
            .maxRetryCount(3)  // up to 3 retries after the first attempt
            .retryBackoff(.constant(.milliseconds(50)))
            .build()
        explain("a) a fetcher that fails twice, with .maxRetryCount(3) and a 50 ms backoff:")
        let article = try await flaky.getOrFetch(forKey: "flaky")
        explain("→ \"\(article.title)\" after \(attempts.count) attempts")

        // b) Always fails.
        let downAttempts = Counter()
        let alwaysFails = try CacheBuilder<Article>()
            .containerName("retries-down")
            .directory(folder)
            .fetcher { _ in
                let attempt = downAttempts.increment()
                print("   fetcher attempt \(attempt): failing")
                throw NetworkError(attempt: attempt)
            }
            .maxRetryCount(2)
            .build()
        explain("b) a fetcher that always fails, with .maxRetryCount(2):")
        do {
            _ = try await alwaysFails.getOrFetch(forKey: "offline")
            explain("unexpected: it succeeded")
        } catch let error as CacheError where error.code == .fetchFailed {
            explain("→ caught CacheError")
            explain("   code: \(error.code), key: \(error.key ?? "-"), attempts: \(error.attempts ?? 0)")
            explain("   underlyingError: \(error.underlyingError.map { "\($0)" } ?? "nil")")
        }

        // c) Same cache, now with a delegate that supplies a fallback.
        let fallback = FallbackProvider()  // held weakly: keep it alive while the cache uses it
        alwaysFails.delegate = fallback
        explain("c) the same cache with a delegate that supplies a fallback:")
        let placeholder = try await alwaysFails.getOrFetch(forKey: "offline")
        explain(
            "→ \"\(placeholder.title)\"; stored? \(alwaysFails.value(forKey: "offline") != nil) (fallbacks are not cached)"
        )
        withExtendedLifetime(fallback) {}
        await flaky.flush()  // nothing left to write once the scratch folder goes
        await alwaysFails.flush()
    }
}
