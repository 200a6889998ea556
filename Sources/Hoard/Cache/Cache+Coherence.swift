import Foundation

extension Cache {
    /// Applies what the shared level announced: drops the keys others changed, or everything when
    /// tracking was lost, and reopens the local levels once tracking is confirmed.
    ///
    /// Called on the shared level's thread, one event at a time.
    func apply(_ invalidation: CacheInvalidation) {
        switch invalidation {
        case .keys(let keys):
            for key in keys { reporter.deliver(engine.invalidate(key, origin: self), from: self) }
            reporter.didInvalidate(keys.count)
        case .all(let reason):
            HoardLogger.log(.info, "Coherence: dropping every local copy (\(reason)); reads go to the shared level.")
            dropLocalCopies()
            reporter.didFlushForCoherence()
        case .tracking:
            // Nothing was stored locally while the gate was closed: there is nothing to drop.
            engine.setCoherent(true)
        }
    }

    /// Whether the local levels take copies (tracking is confirmed), for the tests.
    var isCoherent: Bool {
        guard let coherence = engine.coherence else { return false }
        return engine.stripes.locks.withLock(0) { coherence.isOpen }
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
            engine.didClearDisk()
            reporter.tellPeers(disk.observers(except: self), .cleared)
            cleared.leave()
        }
        return cleared
    }
}
