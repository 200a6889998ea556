import HoardTestSupport

@testable import Hoard

/// Records the evictions and the failed stores a disk store reports.
final class EvictionRecorder: DiskStoreObserver {
    let evicted = Protected<[String]>([])
    let failed = Protected<[String]>([])
    func diskStore(willEvictKey key: String, reason: EvictionReason) { evicted.withLock { $0.append(key) } }
    func diskStore(didFailToStoreKey key: String, error: CacheError) { failed.withLock { $0.append(key) } }
    func diskStoreDidChange(key: String) {}
    func diskStoreDidClear() {}
    func diskStoreWillClear() {}
    func diskStoreDidEndClear() {}
    func waitForSharedChanges(of key: String) async {}
}
