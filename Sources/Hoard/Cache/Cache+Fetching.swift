import Dispatch

extension Cache {
    /// Returns the live value for a key from memory, else disk, else the fetcher, storing what it
    /// fetches with the builder's default expiry.
    ///
    /// An expired value is fetched again. When the fetch fails and the builder set
    /// `serveStaleOnFetchFailure(true)`, the expired value is returned instead (see
    /// ``CacheEntry/isExpired`` and ``CacheEvent/servedStale(key:value:expiredAt:)``).
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
        // What storing the fetched value evicted from memory: reported by `settle`, once the flight
        // has left the table, so that a delegate may ask for any key, this one included.
        let evicted = Locked<[Eviction]>([])
        return try await flights.value(forKey: key) { [self] in
            try await fetchValue(forKey: key, evicted: evicted)
        } settle: { [self] result in
            settleFetch(forKey: key, result, evicted: evicted.withLock { $0 })
        }
    }

    /// Calls `onComplete` with the value for a key from memory, disk or the fetcher.
    ///
    /// The same as the async ``getOrFetch(forKey:)-4zr8e``, for code that uses callbacks.
    /// `onComplete` is called once, on a dispatch queue of its own; it may block or call back into the
    /// cache, the blocking `getOrFetch` included.
    public func asyncGet(forKey key: String, onComplete: @escaping @Sendable (Result<Value, any Error>) -> Void) {
        // Unstructured on purpose: a callback API has no task to attach the work to.
        FetchTask.run { [self] in
            let result = await fetchResult(forKey: key)
            // A serial queue of its own gets a thread even when others block, unlike the global queue
            // (about one thread per core on Linux); and a callback that blocks holds up no fetch.
            DispatchQueue(label: "Hoard.asyncGet").async { onComplete(result) }
        }
    }

    private func fetchResult(forKey key: String) async -> Result<Value, any Error> {
        do {
            return .success(try await getOrFetch(forKey: key))
        } catch {
            return .failure(error)
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
        // Unstructured on purpose: a synchronous caller has no task; this thread waits for it.
        FetchTask.run { [self] in
            let result = await fetchResult(forKey: key)
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        guard let result = outcome.withLock({ $0 }) else { throw CancellationError() }
        return try result.get()
    }

    /// Runs the fetcher with retries and stores what it returns; the body of one shared fetch.
    ///
    /// Calls no delegate: what must be reported goes to `evicted` or out as the error, for
    /// ``settleFetch(forKey:_:evicted:)``.
    func fetchValue(forKey key: String, evicted: Locked<[Eviction]>) async throws -> Value {
        // A set may have stored the value since the caller looked (memory only: a disk hit would be
        // copied into memory, and what that evicts would be reported inside the flight).
        if let memory {
            if let cached = memory.value(forKey: key), !cached.isExpired(at: { now }) { return cached.value }
        } else if let value = valueFromDisk(forKey: key) {
            return value
        }
        guard let fetcher else { throw CacheError.notFound(key: key) }
        // A set or removal made while the fetcher runs wins over what it returns.
        let changes = stripes.changes(key.hashValue)
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
            state.withLock { $0.statistics.fetches += 1 }
            do {
                let value = try await fetcher(key)
                let cached = CachedValue(value, expiresAt: defaultExpiry.expiry(storedAt: clock()))
                let displaced = store(cached, forKey: key, ifUnchangedSince: changes)
                evicted.withLock { $0 = displaced }
                return value
            } catch {
                if error is CancellationError && Task.isCancelled { throw error }
                lastError = error
            }
        }
        throw CacheError.fetchFailed(key: key, attempts: attempts, underlying: lastError)
    }

    /// Reports what a fetch did and, when it failed, serves the stale value or asks the delegate for
    /// a fallback.
    ///
    /// Runs after the fetch has left the table of fetches in flight, outside every lock.
    func settleFetch(
        forKey key: String,
        _ result: Result<Value, any Error>,
        evicted: [Eviction]
    ) -> Result<Value, any Error> {
        reportMemoryEvictions(evicted)
        guard case .failure(let error) = result, let failure = error as? CacheError, failure.code == .fetchFailed
        else { return result }
        state.withLock { $0.statistics.fetchFailures += 1 }
        if servesStaleOnFetchFailure, let stale = entry(forKey: key) {
            // A live value here was set while the fetch ran: better still than a stale one.
            if stale.isExpired, let expiredAt = stale.expiresAt {
                HoardLogger.log(
                    .info,
                    "Fetching \"\(key.prefix(100))\" failed; serving the value that expired at \(expiredAt). "
                        + "\(failure.message)"
                )
                hub.emit(.servedStale(key: key, value: stale.value, expiredAt: expiredAt))
            }
            return .success(stale.value)
        }
        if let fallback = delegate?.cache(self, didFailToFetchForKey: key, error: failure) {
            HoardLogger.log(.info, "Fetching \"\(key.prefix(100))\" failed; the delegate supplied a fallback value.")
            return .success(fallback)
        }
        HoardLogger.log(.warning, failure.message)
        return result
    }
}
