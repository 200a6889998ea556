import Foundation
import HoardTestSupport

@testable import Hoard

/// A clock that moves only when a test says so; hand `read` to `CacheBuilder.clock(_:)`.
final class ManualClock: Sendable {
    private let current: Protected<Date>
    private let reads = Protected(0)

    init(_ start: Date = Date(timeIntervalSince1970: 1_000_000)) {
        current = Protected(start)
    }

    var now: Date { current.withLock { $0 } }

    /// The closure a builder takes; each call counts in ``readCount``.
    var read: @Sendable () -> Date {
        {
            self.reads.withLock { $0 += 1 }
            return self.now
        }
    }

    /// How many times ``read`` was called.
    var readCount: Int { reads.withLock { $0 } }

    func advance(by seconds: TimeInterval) {
        current.withLock { $0 += seconds }
    }
}

extension AsyncStream {
    /// Collects elements until one satisfies `isLast` (included), or the stream ends.
    func collect(through isLast: (Element) -> Bool) async -> [Element] {
        var collected: [Element] = []
        for await element in self {
            collected.append(element)
            if isLast(element) { break }
        }
        return collected
    }
}
