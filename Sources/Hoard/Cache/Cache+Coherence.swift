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

    /// Closes the local levels and empties them: memory, and the entry files on disk.
    func dropLocalCopies() {
        engine.setCoherent(false)
        guard let disk else { return }
        engine.clearDisk()
        // A read made between the two clears may have copied a disk value back into memory.
        engine.forgetAll()
        reporter.tellPeers(disk.observers(except: self), .cleared)
    }
}
