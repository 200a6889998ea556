import Foundation

extension Cache {
    /// Applies what the shared level announced: drops the keys others changed, or everything when
    /// tracking was lost, and reopens the local levels once tracking is confirmed.
    ///
    /// Called on the shared level's thread, one event at a time.
    func handle(_ invalidation: CacheInvalidation) {
        switch invalidation {
        case .keys(let keys):
            for key in keys { invalidate(key) }
            reporter.didInvalidate(keys.count)
            // After the invalidation: a waiter that reads the key now installs what it finds.
            engine.shared?.leases?.wake(keys)
        case .all(let reason):
            // A read sent before the loss may have missed a change: a read that begins now must not
            // be handed its answer.
            flights.retireAll()
            engine.shared?.forgetWrittenBytes()
            defer { engine.shared?.leases?.wakeAll() }
            if engine.coherence?.servesDuringOutage == true, engine.isCoherent {
                // The copies keep serving; they go once tracking is back (see `.tracking`). Counted
                // as a change of every key, so that no fill whose read spans the loss is installed;
                // fills from now on stay in memory (see `CoherenceGate.isTracked`).
                outage.withLock { $0.dropsOnReturn = true }
                engine.setTracked(false)
                HoardLogger.log(
                    .info,
                    "Coherence: \(reason); local copies keep serving (each at most the maximum local age old) "
                        + "and are dropped once tracking is back."
                )
                return
            }
            HoardLogger.log(.info, "Coherence: dropping every local copy (\(reason)); reads go to the shared level.")
            engine.setTracked(false)
            dropLocalCopies()
            reporter.didFlushForCoherence()
        case .tracking:
            // A read sent during the loss may have missed a change that went unannounced.
            flights.retireAll()
            // Writes made across the loss may record bytes whose echo never came.
            engine.shared?.forgetWrittenBytes()
            // A change may have gone unannounced while tracking was lost: what was kept goes now.
            // With the gate closed during the loss, nothing was stored locally: nothing to drop.
            if outage.withLock({ outage in
                defer { outage = (false, true) }
                return outage.dropsOnReturn
            }) {
                HoardLogger.log(.info, "Coherence: tracking is back; dropping the local copies kept during the loss.")
                dropLocalCopies()
                reporter.didFlushForCoherence()
            }
            engine.setTracked(true)
            engine.setCoherent(true)
        }
    }

    /// Drops the local copies of `key`, which changed on the shared level, unless the change may be
    /// the echo of this cache's own last write of it: then the copies stay while ``checkEcho(_:written:)``
    /// reads the key back.
    ///
    /// - Parameters:
    ///   - key: The key that changed.
    ///   - mayBeEcho: `false` once the echo check found the server's value differs.
    func invalidate(_ key: String, mayBeEcho: Bool = true) {
        // A read of the key already sent may predate the change: the reads that begin from now on
        // start one of their own rather than wait for its answer (first, so that none joins it once
        // the copies are dropped).
        flights.retire(key)
        let (outcome, echo) = engine.invalidate(key, origin: self, mayBeEcho: mayBeEcho)
        reporter.deliver(outcome, from: self)
        if let echo { checkEcho(key, written: echo) }
    }

    /// Reads `key` back from the shared level after an invalidation that may be the echo of this
    /// cache's own write of `written`: the copies stay when the server still holds exactly those
    /// bytes, and go otherwise (another instance wrote or removed the key, the server lost it, or
    /// the read failed).
    ///
    /// An invalidation that comes meanwhile finds no written bytes left and drops the copies at
    /// once; a copy is never put back, so a change the read missed is never hidden.
    ///
    /// The checks that come while a read-back is under way wait for the next, which reads them in
    /// one request where the level can (`MGET` on Redis): one read-back per key cost a busy fleet
    /// about a third more requests than it makes without coherence. When more wait than one request
    /// carries (large own writes, say), more than the read-backs running take in their next requests,
    /// another starts, up to ``EchoChecks/readerLimit``, so that checks do not pile up behind one
    /// another. A loop stops once nothing waits.
    private func checkEcho(_ key: String, written: Data) {
        guard let shared = engine.shared else { return }
        let starts = echoChecks.withLock { checks in
            checks.lastID &+= 1
            checks.waiting.append((key, written, checks.lastID))
            checks.newest[key] = (checks.lastID, (checks.newest[key]?.count ?? 0) + 1)
            checks.waitingBytes += written.count
            checks.underWay += 1
            // Another loop only when more waits than the running ones take in their next requests.
            let needsReader =
                checks.readers == 0
                || (checks.readers < EchoChecks.readerLimit
                    && (checks.waiting.count > EchoChecks.requestLimits.keys * checks.readers
                        || checks.waitingBytes > EchoChecks.requestLimits.bytes * checks.readers))
            if needsReader { checks.readers += 1 }
            return needsReader
        }
        guard starts else { return }
        FetchTask.run { [weak self] in
            while let batch = self?.takeWaitingEchoes() {
                let current = await shared.read(batch.map(\.key))
                guard let cache = self else { return }
                cache.settleEchoes(batch, current)
            }
        }
    }

    /// The echo checks waiting for a read-back, oldest first, as many as one request reads (see
    /// ``EchoChecks/requestLimits``; a larger write alone); `nil` when none is waiting, and this
    /// read-back loop stops.
    private func takeWaitingEchoes() -> [EchoChecks.Check]? {
        echoChecks.withLock { checks in
            guard !checks.waiting.isEmpty else {
                checks.readers -= 1
                return nil
            }
            var batch: [EchoChecks.Check] = []
            var bytes = 0
            while let check = checks.waiting.first, batch.count < EchoChecks.requestLimits.keys {
                if !batch.isEmpty && bytes + check.written.count > EchoChecks.requestLimits.bytes { break }
                batch.append(check)
                bytes += check.written.count
                _ = checks.waiting.popFirst()
            }
            checks.waitingBytes -= bytes
            return batch
        }
    }

    /// Keeps the copies of each key the server still holds as written, and drops the others.
    ///
    /// A check of bytes that a newer own write of the key replaced says nothing of the local copy,
    /// which is that newer write's: the server holding the newer bytes keeps the copy, and so does a
    /// newer check of the key, which decides on a read of its own. Every later change of the key is
    /// announced, and then checked against the newer bytes or dropped at once.
    private func settleEchoes(_ batch: [EchoChecks.Check], _ current: [Result<Data?, CacheError>]) {
        for (check, read) in zip(batch, current) {
            let found: Data? = if case .success(let bytes?) = read { bytes } else { nil }
            // Looked at before the newer checks, since an echo takes these bytes before it registers
            // its check: one that comes meanwhile is seen by one look or the other, unless it falls
            // between its two steps, and then the copy goes (a read more later, never a stale value).
            let newerWrite = found != nil && found != check.written ? engine.shared?.writtenBytes(of: check.key) : nil
            let isSuperseded = echoChecks.withLock { $0.settle(check) }
            if let found, found == check.written || found == newerWrite {
                engine.stripes.tally.withLock { $0.echoesConfirmed += 1 }
                reporter.deliver(engine.dropOtherDiskCopy(of: check.key, confirmed: found, origin: self), from: self)
            } else if !isSuperseded {
                invalidate(check.key, mayBeEcho: false)
            }
        }
        echoChecks.withLock { $0.underWay -= batch.count }
    }

    /// How many echo checks are under way, for the tests.
    var echoChecksUnderWay: Int { echoChecks.withLock { $0.underWay } }

    /// Whether tracking is confirmed: the local levels take copies, and no loss is pending (for the
    /// tests).
    var isCoherent: Bool {
        guard let coherence = engine.coherence else { return false }
        return engine.stripes.locks.withLock(0) { coherence.isOpen } && !outage.withLock { $0.dropsOnReturn }
    }

    /// Opens the local levels of a cache built while its shared level cannot be reached yet, when
    /// its coherence serves local copies during an outage: what it reads or fetches until tracking
    /// is first confirmed is kept, and dropped then, as after any loss.
    func servesUntilFirstTracked() {
        guard let coherence = engine.coherence, coherence.servesDuringOutage else { return }
        // Decided under the lock `.tracking` takes: a confirmation that comes meanwhile drops what
        // this lets in.
        let opens = outage.withLock { outage -> Bool in
            guard !outage.wasTracked else { return false }
            outage.dropsOnReturn = true
            return true
        }
        if opens { engine.setCoherent(true) }
    }

    /// Whether a disk clear begun by a loss of tracking (or by `build()`) is still under way, for
    /// the tests.
    var isClearingDisk: Bool {
        guard let coherence = engine.coherence else { return false }
        return engine.stripes.locks.withLock(0) { coherence.isClearingDisk }
    }

    /// Closes the local levels and empties them: memory at once, and the entry files on disk on a
    /// thread of its own, so that the tracking connection's thread (which calls this) goes back to
    /// reading at once; the disk level serves nothing from the close until that clear is done.
    ///
    /// - Returns: A group that is left once the disk is cleared and the other caches on the
    ///   container were told.
    @discardableResult
    func dropLocalCopies() -> DispatchGroup {
        let cleared = DispatchGroup()
        guard let disk else {
            engine.setCoherent(false)
            return cleared
        }
        engine.setCoherent(false, clearsDisk: true)
        cleared.enter()
        Thread.detachNewThread { [self] in
            engine.clearDisk()
            ClearTestHooks.installed.run(.droppedLocalDisk, for: self)
            engine.didClearDisk()
            reporter.tellPeers(.cleared(for: disk.observers(except: self)))
            cleared.leave()
        }
        return cleared
    }
}

/// The echo checks of one cache (see `Cache.checkEcho`).
struct EchoChecks {
    /// The most keys, and bytes expected back (those written; at least one key's), that one read-back
    /// asks for: a burst of large own writes is read back in several requests, none of which holds
    /// the server's reply, or the connection, for long.
    static let requestLimits = (keys: 256, bytes: 1 << 20)

    /// The most read-backs under way at once: as many as the shared level's writes (see
    /// `SharedLevel.workerLimit`), whose echoes they check.
    static let readerLimit = SharedLevel.workerLimit

    /// One key to read back, with the bytes this cache wrote, numbered in the order the checks came.
    typealias Check = (key: String, written: Data, id: UInt64)

    /// The checks waiting for the next read-back, oldest first (a backlog is taken batch by batch
    /// without moving what stays).
    var waiting = FrontQueue<Check>()
    /// The number of the latest check.
    var lastID: UInt64 = 0
    /// For each key with checks waiting or being read: the number of its newest check, and how many
    /// there are.
    var newest: [String: (id: UInt64, count: Int)] = [:]
    /// The bytes written of the checks waiting.
    var waitingBytes = 0
    /// How many tasks are reading keys back; each takes what waits until nothing does.
    var readers = 0
    /// The checks waiting or being read.
    var underWay = 0

    /// Forgets `check`, whose read-back is done; returns whether a newer check of its key came
    /// since (a newer own write's echo, which decides for the copies).
    mutating func settle(_ check: Check) -> Bool {
        guard let latest = newest[check.key] else { return false }
        newest[check.key] = latest.count > 1 ? (latest.id, latest.count - 1) : nil
        return latest.id != check.id
    }
}
