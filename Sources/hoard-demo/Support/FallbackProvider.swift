import Foundation
import Hoard

/// Supplies a placeholder when every fetch attempt failed (returned to the caller, not stored).
final class FallbackProvider: CacheDelegate, Sendable {
    typealias Value = Article

    func cache(_ cache: Cache<Article>, didFailToFetchForKey key: String, error: any Error) -> Article? {
        print("     ↳ delegate: didFailToFetchForKey \"\(key)\" — returning a placeholder")
        return Article(id: key, title: "Offline placeholder for \(key)")
    }
}
