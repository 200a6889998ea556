import Foundation
import Hoard

extension Demo {
    // MARK: 6

    /// Step 6: the callback form, and the blocking form on a plain thread.
    static func callbackAndBlockingForms(in folder: URL) async throws {
        section(6, "The callback form and the blocking form")
        let network = SlowNetwork()
        let cache = try CacheBuilder<Article>()
            .containerName("forms")
            .directory(folder)
            .fetcher { key in try await network.get(key) }
            .build()

        // asyncGet(forKey:onComplete:) calls back once, on a Hoard background thread.
        let result = await withCheckedContinuation {
            (continuation: CheckedContinuation<Result<Article, any Error>, Never>) in
            cache.asyncGet(forKey: "callbacks") { result in
                continuation.resume(returning: result)
            }
        }
        switch result {
        case .success(let article):
            explain("asyncGet(forKey:onComplete:) → .success(\"\(article.title)\")")
        case .failure(let error):
            explain("asyncGet(forKey:onComplete:) → .failure(\(error))")
        }

        // The blocking getOrFetchAndWait(forKey:) is for synchronous code: call it from a plain thread, and
        // resume this task when that thread has its answer (no sleeping, no polling).
        let blocking = await withCheckedContinuation {
            (continuation: CheckedContinuation<(Result<Article, any Error>, Bool), Never>) in
            let thread = Thread {
                let result = Result { try cache.getOrFetchAndWait(forKey: "blocking") }  // blocks this thread only
                continuation.resume(returning: (result, Thread.isMainThread))
            }
            thread.name = "demo-blocking-caller"
            thread.start()
        }
        switch blocking.0 {
        case .success(let article):
            explain(
                "getOrFetchAndWait on a plain Thread (main thread: \(blocking.1)) → \"\(article.title)\""
            )
        case .failure(let error):
            explain("getOrFetchAndWait → error \(error)")
        }

        // The synchronous helper below hides the blocking call from async code; again on a thread.
        let again = await withCheckedContinuation { (continuation: CheckedContinuation<String, Never>) in
            Thread { continuation.resume(returning: titleBlocking(cache, "blocking")) }.start()
        }
        explain("blocking again, via a sync helper → \"\(again)\" (memory hit)")
        explain("fetcher calls: \(network.calls.count)")
        await cache.flush()  // nothing left to write once the scratch folder goes
    }

    /// Synchronous code calling the blocking form.
    static func titleBlocking(_ cache: Cache<Article>, _ key: String) -> String {
        (try? cache.getOrFetchAndWait(forKey: key).title) ?? "error"
    }
}
