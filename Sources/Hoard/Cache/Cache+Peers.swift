/// How the disk store reaches a cache: the fate of its writes, and the changes other caches on the
/// container make.
///
/// The store holds its caches weakly and calls these outside its locks, from its background writer
/// or from the thread of the cache that made the change.
extension Cache: DiskStoreObserver {
    @usableFromInline
    func diskStore(willEvictKey key: String, reason: EvictionReason) {
        var outcome = CacheOutcome<Value>(key: key)
        outcome.diskEvictions = [(key, reason)]
        reporter.deliver(outcome, from: self)
    }

    @usableFromInline
    func diskStore(didFailToStoreKey key: String, error: CacheError) {
        var outcome = CacheOutcome<Value>(key: key)
        outcome.storeFailure = error
        reporter.deliver(outcome, from: self)
    }

    @usableFromInline
    func diskStoreDidChange(key: String) {
        engine.forget(key)
        // A read that begins now must not be handed what one sent before the change returns.
        retireReads(of: key)
    }

    @usableFromInline
    func diskStoreDidClear() {
        engine.forgetAll()
        retireReads(of: nil)
    }

    @usableFromInline
    func diskStoreWillClear() {
        engine.beginClear()
    }

    @usableFromInline
    func diskStoreDidEndClear() {
        engine.endClear()
        retireReads(of: nil)
    }

    @usableFromInline
    func waitForSharedChanges(of key: String) async {
        await engine.shared?.waitForOwnChanges(of: key)
    }
}
