import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Cancelling the task that awaits a composed level's `get` reaches the slow level under it,
/// whenever the cancellation lands: before the task starts, during the memory miss, or in the sleep.
@Suite struct ComposeCancellationStressTests {
    /// A level that takes seconds unless cancelled, and counts the gets that ran to their end.
    struct Slow: Fetcher {
        typealias Key = String
        typealias Value = Int
        let finished: Protected<Int>

        func get(_ key: String) async throws -> Int {
            try await Task.sleep(for: .seconds(3))
            finished.withLock { $0 += 1 }
            return 1
        }
    }

    @Test func cancellationAtAnyMomentReachesTheLevelBelow() async throws {
        let finished = Protected(0)
        let returned = Protected(0)
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<400 {
                group.addTask {
                    let level = MemoryCacheLevel<String, Int>(capacity: 4).compose(Slow(finished: finished))
                    let task = Task { try await level.get("k\(index)") }
                    // Cancelled at once, or after up to 3 ms: before, during and after the task starts.
                    if index % 4 > 0 { try? await Task.sleep(for: .milliseconds(index % 4)) }
                    task.cancel()
                    if (try? await task.value) != nil { returned.withLock { $0 += 1 } }
                }
            }
        }
        #expect(finished.withLock { $0 } == 0, "a cancelled get ran the level below to its end")
        #expect(returned.withLock { $0 } == 0, "a cancelled get returned a value")
    }
}
