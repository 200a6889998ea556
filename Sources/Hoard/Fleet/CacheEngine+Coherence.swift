import Foundation

extension CacheEngine {
    /// Drops the local copies of `key`, which changed on the shared level, under its stripe.
    ///
    /// Counted as a change of the key, so that a fill whose shared read was sent before (see
    /// ``store(_:forKey:ifUnchangedSince:origin:whenOnDisk:toShared:whenShared:serialized:)``) does
    /// not install what it read. When this cache's own write of the key is queued or under way, the
    /// local value is newer than the server's: it stays until that write is made, then the shared
    /// level hands the key back here (``SharedLevel/defersInvalidation(of:)``). When this cache made
    /// the key's last write and no invalidation of it came since, this may be that write's echo: the
    /// copies stay, and the bytes written are returned for the caller to check against the server's.
    ///
    /// - Parameters:
    ///   - key: The key that changed.
    ///   - origin: The cache the disk level's peers hear the removal from.
    ///   - mayBeEcho: Whether the invalidation may be the echo of this cache's own write (`false`
    ///     once that was checked and found not to be).
    /// - Returns: What happened: the other caches on the container to tell, and the bytes this
    ///   cache wrote when the copies stay until the echo is checked.
    func invalidate(
        _ key: String,
        origin: (any DiskStoreObserver)?,
        mayBeEcho: Bool = true
    ) -> (outcome: CacheOutcome<Value>, echo: Data?) {
        var outcome = CacheOutcome<Value>(key: key)
        var echo: Data?
        var tallied = \CoherenceTally.droppedNotHeld
        stripes.change(key.hashValue) {
            if let shared {
                if shared.defersInvalidation(of: key) {
                    tallied = \.deferred
                    return
                }
                // After a failed check, bytes kept now are a newer write's: they wait for its echo.
                if mayBeEcho, let written = shared.takeWrittenBytes(of: key) {
                    echo = written
                    tallied = \.echoChecks
                    return
                }
            }
            if let disk { outcome.tell(disk.enqueueRemove(DiskKey(key), observer: origin)) }
            if memory?.removeValue(forKey: key) != nil { tallied = \.droppedHeld }
        }
        stripes.tally.withLock { $0[keyPath: tallied] += 1 }
        return (outcome, echo)
    }

    /// Removes the disk copy of `key` when its file no longer holds what the shared level was found
    /// to hold, `confirmed`, this cache's own write (its echo check kept the copies).
    ///
    /// Another process on the container may have written the key's file after this cache's write
    /// landed there, with a value that reached the shared level before this write: that process
    /// removes it once this write's invalidation reaches it, but it may die first, and this cache,
    /// whose echo check keeps its copies, was the one left to notice. The file is read holding no
    /// lock; the removal is queued under the key's stripe, unless a newer operation of this cache on
    /// the key is pending (that one lands after it, and is the key's latest).
    ///
    /// - Returns: What happened: the other caches on the container to tell.
    func dropOtherDiskCopy(of key: String, confirmed: Data, origin: (any DiskStoreObserver)?) -> CacheOutcome<Value> {
        var outcome = CacheOutcome<Value>(key: key)
        guard let disk, let written = try? EntryFormat.decode([UInt8](confirmed)) else { return outcome }
        let diskKey = DiskKey(key)
        guard case .stored(let entry) = disk.lookup(diskKey, countsAccess: false), entry.payload != written.payload
        else { return outcome }
        stripes.change(key.hashValue) {
            guard !disk.hasPendingOperation(diskKey) else { return }
            outcome.tell(disk.enqueueRemove(diskKey, observer: origin))
        }
        return outcome
    }

    /// Closes or opens the gate (see ``CoherenceGate``), counted as a change of every key so that no
    /// fill sent before is installed; closing it empties memory.
    ///
    /// - Parameters:
    ///   - isOpen: Whether the gate opens.
    ///   - clearsDisk: When closing, whether a disk clear follows: the disk level serves nothing
    ///     until ``didClearDisk()``, whether the gate opened again meanwhile or not.
    func setCoherent(_ isOpen: Bool, clearsDisk: Bool = false) {
        guard let coherence else { return }
        stripes.changeAll {
            coherence.setOpen(isOpen)
            if clearsDisk { coherence.countDiskClear(1) }
            if !isOpen { memory?.removeAll() }
        }
    }

    /// Notes whether the shared level's invalidations arrive (see ``CoherenceGate/isTracked``),
    /// counted as a change of every key.
    func setTracked(_ isTracked: Bool) {
        guard let coherence else { return }
        stripes.changeAll { coherence.setTracked(isTracked) }
    }

    /// Whether the gate is open (the local levels take copies); `true` without coherence.
    var isCoherent: Bool {
        guard let coherence else { return true }
        return stripes.locks.withLock(0) { coherence.isOpen }
    }

    /// Ends a disk clear that ``setCoherent(_:clearsDisk:)`` began: the disk level serves again.
    func didClearDisk() {
        guard let coherence else { return }
        stripes.changeAll { coherence.countDiskClear(-1) }
    }
}
