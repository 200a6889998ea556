import HoardTestSupport

@testable import Hoard

/// Records the evictions a disk store reports.
final class EvictionRecorder: DiskStoreObserver {
    let evicted = Protected<[String]>([])
    func diskStore(willEvictKey key: String, reason: EvictionReason) { evicted.withLock { $0.append(key) } }
    func diskStore(didFailToStoreKey key: String, error: CacheError) {}
    func diskStoreDidChange(key: String) {}
    func diskStoreDidClear() {}
}
