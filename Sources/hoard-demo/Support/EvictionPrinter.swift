import Foundation
import Hoard

/// Prints what the cache evicts.
///
/// Hoard holds its delegate weakly: keep a strong reference yourself.
final class EvictionPrinter: CacheDelegate, Sendable {
    typealias Value = Article

    func cache(_ cache: Cache<Article>, willEvictFromMemory value: Article, forKey key: String) {
        print("     ↳ delegate: willEvictFromMemory  \"\(key)\" (\(value.title))")
    }

    func cache(_ cache: Cache<Article>, willEvictFromDiskForKey key: String) {
        print("     ↳ delegate: willEvictFromDiskForKey \"\(key)\"")
    }

    func cacheWillClearMemory(_ cache: Cache<Article>) {
        print("     ↳ delegate: cacheWillClearMemory")
    }

    func cacheWillClearDisk(_ cache: Cache<Article>) {
        print("     ↳ delegate: cacheWillClearDisk")
    }
}
