import Foundation
import Hoard

extension CacheEvent {
    /// The event as the demo prints it; times are given relative to `now`, so that no run's clock
    /// shows in the output.
    ///
    /// - Parameter now: The cache's current time (its injected clock).
    /// - Returns: One line, starting with `event:`.
    func narration(now: Date) -> String {
        let key = "\"\(self.key ?? "")\""
        let level = self.level.map { "\($0)" } ?? "?"
        return switch kind {
        case .set: "event: set \(key)"
        case .hit: "event: hit \(key) in \(level)"
        case .miss: "event: miss \(key)"
        case .evicted: "event: evicted \(key) from \(level) (\(reason.map { "\($0)" } ?? "?"))"
        case .servedStale:
            "event: served stale \(key) (expired \(Int(now.timeIntervalSince(expiredAt ?? now).rounded())) s ago)"
        case .removed: "event: removed \(key)"
        case .cleared: "event: cleared \(level)"
        case .sharedMiss: "event: shared level miss \(key)"
        case .sharedFailure: "event: shared level failed for \(key): \(error.map { "\($0.code)" } ?? "?")"
        default: "event: \(kind) \(key)"
        }
    }
}
