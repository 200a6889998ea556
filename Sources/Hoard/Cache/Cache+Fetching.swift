import Dispatch

extension Cache {
    /// Returns the value for a key from memory, else disk, else the fetcher, storing what it fetches.
    ///
    /// Concurrent calls for one key share one fetch; its value or error reaches every caller.
    /// A failed fetch is retried ``maxRetryCount`` times (waiting as the builder's ``RetryBackoff``
    /// says), checking for cancellation before each attempt. When every attempt fails, the delegate may
    /// supply a fallback value, which is returned but not stored.
    ///
    /// Cancelling the calling task makes this call throw `CancellationError` at once; the fetch goes
    /// on for the other callers and is cancelled when all of them have cancelled.
    ///
    /// - Throws: ``CacheError/notFound`` when the value is missing and there is no fetcher;
    ///   ``CacheError`` with code `fetchFailed` (carrying the key, the attempts and the last error)
    ///   when every attempt failed; `CancellationError`.
    public func getOrFetch(forKey key: String) async throws -> Value {
        if let value = value(forKey: key) { return value }
        guard fetcher != nil else { throw CacheError.notFound(key: key) }
        return try await flights.value(forKey: key) { [self] in try await fetchValue(forKey: key) }
    }

    /// Calls `onComplete` with the value for a key from memory, disk or the fetcher.
    ///
    /// The same as the async ``getOrFetch(forKey:)-4zr8e``, for code that uses callbacks.
    /// `onComplete` is called once, on a global dispatch queue; it may block or call back into the
    /// cache, the blocking `getOrFetch` included.
    public func asyncGet(forKey key: String, onComplete: @escaping @Sendable (Result<Value, any Error>) -> Void) {
        FetchTask.run { [self] in
            let result: Result<Value, any Error>
            do {
                result = .success(try await getOrFetch(forKey: key))
            } catch {
                result = .failure(error)
            }
            // Not on the fetch executor: a callback that blocks must not hold up other fetches.
            DispatchQueue.global().async { onComplete(result) }
        }
    }

    /// Returns the value for a key from memory, disk or the fetcher: ``getOrFetch(forKey:)-4zr8e``
    /// under the name a cache level uses.
    ///
    /// - Throws: The same errors as ``getOrFetch(forKey:)-4zr8e``.
    public func get(_ key: String) async throws -> Value {
        try await getOrFetch(forKey: key)
    }

    /// Returns the value for a key from memory, disk or the fetcher, blocking the calling thread.
    ///
    /// The same as the async ``getOrFetch(forKey:)-4zr8e``, for synchronous code on a plain thread.
    /// The fetch runs on Hoard's own executor, so blocked callers cannot starve it. Do not call this
    /// from the main thread of an app (it blocks) or from code that the fetcher itself waits on.
    ///
    /// - Throws: The same errors as the async form.
    @available(*, noasync, message: "Use the async getOrFetch(forKey:) from async code.")
    public func getOrFetch(forKey key: String) throws -> Value {
        if let value = value(forKey: key) { return value }
        guard fetcher != nil else { throw CacheError.notFound(key: key) }
        let outcome = Locked<Result<Value, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        asyncGet(forKey: key) { result in
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        guard let result = outcome.withLock({ $0 }) else { throw CancellationError() }
        return try result.get()
    }

    /// Runs the fetcher with retries; the body of one shared fetch.
    func fetchValue(forKey key: String) async throws -> Value {
        // A set or another fetch may have stored the value since the caller looked.
        if let value = value(forKey: key) { return value }
        guard let fetcher else { throw CacheError.notFound(key: key) }
        let retries = maxRetryCount
        var lastError: any Error = CacheError.notFound(key: key)
        var attempts = 0
        while attempts <= retries {
            try Task.checkCancellation()
            if attempts > 0 {
                HoardLogger.log(
                    .info,
                    "Retrying the fetch of \"\(key.prefix(100))\" (retry \(attempts) of \(retries)): \(lastError)"
                )
                let wait = retryBackoff.delay(beforeRetry: attempts)
                if wait > .zero { try await retryBackoff.sleep(wait) }
                try Task.checkCancellation()
            }
            attempts += 1
            do {
                let value = try await fetcher(key)
                set(value, forKey: key)
                return value
            } catch {
                if error is CancellationError && Task.isCancelled { throw error }
                lastError = error
            }
        }
        let failure = CacheError.fetchFailed(key: key, attempts: attempts, underlying: lastError)
        if let fallback = delegate?.cache(self, didFailToFetchForKey: key, error: failure) {
            HoardLogger.log(.info, "Fetching \"\(key.prefix(100))\" failed; the delegate supplied a fallback value.")
            return fallback
        }
        HoardLogger.log(.warning, failure.message)
        throw failure
    }
}
