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
    /// A value found in memory is returned without leaving the caller's executor: from the main
    /// actor, a hit costs about what the subscript costs. A memory miss continues off the caller's
    /// executor (a disk read, then the fetch on Hoard's executor).
    ///
    /// - Throws: ``CacheError/notFound`` when the value is missing and there is no fetcher;
    ///   ``CacheError`` with code `fetchFailed` (carrying the key, the attempts and the last error)
    ///   when every attempt failed; `CancellationError`.
    @inlinable
    nonisolated(nonsending) public func getOrFetch(forKey key: String) async throws -> Value {
        if let value = valueFromMemory(forKey: key) { return value }
        // A result, not a thrown error: when a @concurrent callee throws, Swift 6.3 resumes a
        // nonisolated(nonsending) caller off its executor (a main-actor caller would go on off the
        // main actor). Returning normally always hops back.
        return try await getOrFetchAfterMemoryMiss(forKey: key).get()
    }

    /// ``getOrFetch(forKey:)`` once memory missed: disk, then the fetcher, off the caller's executor.
    @concurrent
    @usableFromInline
    func getOrFetchAfterMemoryMiss(forKey key: String) async -> Result<Value, any Error> {
        do {
            return .success(try await fetchAfterMemoryMiss(forKey: key))
        } catch {
            return .failure(error)
        }
    }

    private func fetchAfterMemoryMiss(forKey key: String) async throws -> Value {
        if let value = valueAfterMemoryMiss(forKey: key) { return value }
        return try await fetchAfterLocalMiss(forKey: key)
    }

    /// The shared level, then the fetcher, once memory and disk missed (and the read was counted).
    private func fetchAfterLocalMiss(forKey key: String) async throws -> Value {
        guard fetcher != nil || engine.shared != nil else { throw CacheError.noFetcher(key: key) }
        // What the fetch did is reported by `settle`, once the flight has left the table, so that a
        // delegate may ask for any key, this one included.
        return try await flights.value(forKey: key) { [self] in
            await fetchValue(forKey: key)
        } settle: { [self] fetched in
            settleFetch(forKey: key, fetched)
        }
    }

    /// Calls `onComplete` with the value for a key from memory, disk or the fetcher.
    ///
    /// The same as the async ``getOrFetch(forKey:)``, for code that uses callbacks. `onComplete` is
    /// called once, never on the caller's thread, and may call back into the cache,
    /// ``getOrFetchAndWait(forKey:)`` included:
    /// - for a value found in memory, on one serial queue that Hoard's caches share, with no task
    ///   started: a completion that blocks delays the completions of later memory hits (never a
    ///   fetch). A completion on that queue that asks again, and waits for the answer, gets it on a
    ///   queue of its own, so it cannot wait for itself.
    /// - otherwise, on a dispatch queue of its own, once the disk read or the fetch is done.
    @inlinable
    public func asyncGet(forKey key: String, onComplete: @escaping @Sendable (Result<Value, any Error>) -> Void) {
        // Inlinable, like a subscript hit: the memory read is specialized for the caller's type.
        if let value = valueFromMemory(forKey: key) {
            CallbackQueue.deliver { onComplete(.success(value)) }
            return
        }
        asyncGetAfterMemoryMiss(forKey: key, onComplete: onComplete)
    }

    /// The rest of ``asyncGet(forKey:onComplete:)`` once memory missed: disk, then the fetcher.
    @usableFromInline
    func asyncGetAfterMemoryMiss(
        forKey key: String,
        onComplete: @escaping @Sendable (Result<Value, any Error>) -> Void
    ) {
        // A read asked for from a memory-eviction callback is not copied into memory (see
        // `EvictionCallback`): the task below does not inherit the flag, so the disk read takes it along.
        let isInEvictionCallback = EvictionCallback.isRunning
        // Unstructured on purpose: a callback API has no task to attach the work to.
        FetchTask.run { [self] in
            let result: Result<Value, any Error>
            do {
                let local = EvictionCallback.$isRunning.withValue(isInEvictionCallback) {
                    valueAfterMemoryMiss(forKey: key)
                }
                if let local {
                    result = .success(local)
                } else {
                    result = .success(try await fetchAfterLocalMiss(forKey: key))
                }
            } catch {
                result = .failure(error)
            }
            // A serial queue of its own gets a thread even when others block, unlike the global queue
            // (about one thread per core on Linux); and a callback that blocks holds up no fetch.
            DispatchQueue(label: "Hoard.asyncGet").async { onComplete(result) }
        }
    }

    /// Returns the value for a key from memory, disk or the fetcher: ``getOrFetch(forKey:)``
    /// under the name a cache level uses.
    ///
    /// - Throws: The same errors as ``getOrFetch(forKey:)``.
    @inlinable
    nonisolated(nonsending) public func get(_ key: String) async throws -> Value {
        try await getOrFetch(forKey: key)
    }

    /// Returns the value for a key from memory, disk or the fetcher, blocking the calling thread.
    ///
    /// The same as the async ``getOrFetch(forKey:)``, for synchronous code on a plain thread.
    /// The fetch runs on Hoard's own executor, so blocked callers cannot starve it. Do not call this
    /// from the main thread of an app (it blocks) or from code that the fetcher itself waits on.
    ///
    /// - Throws: The same errors as the async form.
    @available(*, noasync, message: "From async code, use getOrFetch(forKey:).")
    public func getOrFetchAndWait(forKey key: String) throws -> Value {
        // Memory, then disk, on the caller's thread, each read counted once, as the async form does.
        if let value = value(forKey: key) { return value }
        guard fetcher != nil || engine.shared != nil else { throw CacheError.noFetcher(key: key) }
        return try FetchTask.runAndWait { [self] in try await fetchAfterLocalMiss(forKey: key) }.get()
    }

    /// Retires the reads of `key` in flight (of every key for `nil`) after a write of it.
    ///
    /// Called when the write is made here, and again once the shared level has it: a read that
    /// begins once the write has returned (a `set`, a removal, a `save` once the shared level has
    /// it, a `flush` after them) starts one of its own, rather than be handed what a read sent
    /// before the write returns. The callers already waiting still get that read's answer.
    @usableFromInline
    func retireReads(of key: String?) {
        guard fetcher != nil || engine.shared != nil else { return }
        if let key { flights.retire(key) } else { flights.retireAll() }
    }

    /// What one shared fetch did: its result, and what storing the value did.
    struct Fetched: Sendable {
        var result: Result<Value, any Error>
        var outcome: CacheOutcome<Value>
    }

    /// Runs the fetcher with retries and stores what it returns; the body of one shared fetch.
    ///
    /// Tells no delegate and no other cache: what must be reported travels in the returned outcome,
    /// for ``settleFetch(forKey:_:)``.
    func fetchValue(forKey key: String) async -> Fetched {
        var outcome = CacheOutcome<Value>(key: key)
        // This cache's own changes of the key still on their way to the shared level (a removal, a
        // set whose value memory has let go, a clear) are made before it is read: until then it may
        // hold the value they replace. Before the token, so that their landing does not count as a
        // change made during this fetch and cost it its fill.
        await engine.shared?.waitForOwnChanges(of: key)
        // And those of the other caches on the container, whose changes this one sees on disk at
        // once: found on the shared level before they are made, the value they replace would be
        // filled back into the disk they share, and served to them too.
        if engine.shared != nil, let disk = engine.disk {
            for peer in disk.observers(except: self) { await peer.waitForSharedChanges(of: key) }
        }
        // A set or removal made while the shared level or the fetcher answers wins over what they return.
        // Begun before looking again below, so that a set lands either before the look (which sees it)
        // or after the token (which rejects the fill).
        let token = engine.stripes.beginFill(key.hashValue)
        defer { engine.stripes.endFill(token) }
        // A set may have stored the value since the caller looked: in memory, or, when memory has
        // evicted it since, on disk. The caller counted its read, so this look is not counted again.
        if let memory, let cached = memory.peek(key), !cached.isExpired(at: { engine.now }) {
            return Fetched(result: .success(cached.value), outcome: outcome)
        }
        // The index says whether to read the file; while it loads, the file is read rather than the
        // index waited for (that would hold the fetch, and the thread under it, for the whole load).
        if engine.disk != nil && (memory == nil || engine.diskMayHoldLiveValue(forKey: key)) {
            let (value, read) = engine.valueFromDisk(forKey: key, copiesIntoMemory: false, origin: self)
            outcome.merge(read)
            outcome.read = nil
            if let value { return Fetched(result: .success(value), outcome: outcome) }
        }
        let read = await engine.readShared(key)
        if case .failed = read {} else if engine.shared != nil { reporter.sharedReadFailures.succeeded() }
        switch read {
        case .hit(let cached, let serialized):
            // Into disk and memory, not back to the shared level it came from.
            fill(cached, serialized: serialized, forKey: key, ifUnchangedSince: token, into: &outcome)
            return Fetched(result: .success(cached.value), outcome: outcome)
        case .miss:
            if engine.shared != nil { reporter.didMissShared(key) }
        case .failed(let error):
            reporter.didFailOnShared(key, error, isWrite: false)
        }
        guard let fetcher else { return Fetched(result: .failure(CacheError.noFetcher(key: key)), outcome: outcome) }
        // With fleet single fetch, after a miss (not a failure: a server down is fetched around):
        // one instance of the fleet fetches, the others wait for its value.
        var lease: String?
        if case .miss = read, let leases = engine.shared?.leases {
            switch await acquireLease(forKey: key, leases, outcome: outcome) {
            case .found(let found): return found
            case .lease(let token): lease = token
            case .none: break
            }
        }
        // Released unless the value went to the shared level under it (stored, or refused there).
        var leaseIsSpent = false
        defer {
            if let lease, !leaseIsSpent { engine.shared?.leases?.release(forKey: key.canonicalKey, token: lease) }
        }
        let retries = maxRetryCount
        var lastError: any Error = CacheError.notFound(key: key)
        var attempts = 0
        do {
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
                reporter.didCallFetcher()
                do {
                    LockOrder.assertNoneHeld("calling the fetcher")
                    let value = try await fetcher(key)
                    let cached = CachedValue(value, expiresAt: engine.defaultExpiry.expiry(storedAt: engine.clock()))
                    let stored = engine.store(
                        cached,
                        forKey: key,
                        ifUnchangedSince: token,
                        origin: self,
                        lease: lease
                    )
                    leaseIsSpent = stored.stored != nil
                    if let lease, !leaseIsSpent, stored.storeFailure == nil {
                        leaseIsSpent = engine.shareUnderLease(cached, forKey: key, lease: lease)
                    }
                    outcome.merge(stored)
                    return Fetched(result: .success(value), outcome: outcome)
                } catch {
                    if error is CancellationError && Task.isCancelled { throw error }
                    lastError = error
                }
            }
        } catch {
            return Fetched(result: .failure(error), outcome: outcome)
        }
        let failure = CacheError.fetchFailed(key: key, attempts: attempts, underlying: lastError)
        return Fetched(result: .failure(failure), outcome: outcome)
    }

    /// Reports what a fetch did and, when it failed, serves the stale value or asks the delegate for
    /// a fallback.
    ///
    /// Runs after the fetch has left the table of fetches in flight, outside every lock.
    func settleFetch(forKey key: String, _ fetched: Result<Fetched, any Error>) -> Result<Value, any Error> {
        let result: Result<Value, any Error>
        switch fetched {
        case .success(let fetched):
            reporter.deliver(fetched.outcome, from: self)
            result = fetched.result
        case .failure(let error):
            result = .failure(error)
        }
        guard case .failure(let error) = result, let failure = error as? CacheError, failure.code == .fetchFailed
        else { return result }
        reporter.didFailToFetch()
        if engine.servesStaleOnFetchFailure, let stale = entry(forKey: key) {
            // A live value here was set while the fetch ran: better still than a stale one.
            if stale.isExpired, let expiredAt = stale.expiresAt {
                HoardLogger.log(
                    .info,
                    "Fetching \"\(key.prefix(100))\" failed; serving the value that expired at \(expiredAt). "
                        + "\(failure.message)"
                )
                reporter.didServeStale(stale.value, forKey: key, expiredAt: expiredAt)
            }
            return .success(stale.value)
        }
        LockOrder.assertNoneHeld("calling the delegate")
        if let fallback = delegate?.cache(self, didFailToFetchForKey: key, error: failure) {
            HoardLogger.log(.info, "Fetching \"\(key.prefix(100))\" failed; the delegate supplied a fallback value.")
            return .success(fallback)
        }
        HoardLogger.log(.warning, failure.message)
        return result
    }
}
