import Foundation
import Hoard

extension CacheEvent {
    /// The event as the demo prints it; times are given relative to `now`, so that no run's clock
    /// shows in the output.
    ///
    /// - Parameter now: The cache's current time (its injected clock).
    /// - Returns: One line, starting with `event:`.
    func narration(now: Date) -> String {
        switch self {
        case .set(let key, _): "event: set \"\(key)\""
        case .hit(let key, let level): "event: hit \"\(key)\" in \(level)"
        case .miss(let key): "event: miss \"\(key)\""
        case .evicted(let key, let level, let reason): "event: evicted \"\(key)\" from \(level) (\(reason))"
        case .servedStale(let key, _, let expiredAt):
            "event: served stale \"\(key)\" (expired \(Int(now.timeIntervalSince(expiredAt).rounded())) s ago)"
        case .removed(let key): "event: removed \"\(key)\""
        case .cleared(let level): "event: cleared \(level)"
        case .sharedMiss(let key): "event: shared level miss \"\(key)\""
        case .sharedFailure(let key, let error): "event: shared level failed for \"\(key)\": \(error.code)"
        @unknown default: "event: \(self)"
        }
    }
}
