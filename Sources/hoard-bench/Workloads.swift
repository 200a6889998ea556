import Foundation
import HoardTestSupport

// Workload generators and the plain-thread runner shared by the scenarios.

// MARK: - Zipf

/// Key indices drawn from Zipf(`exponent`) over `0 ..< keys`, index 0 the most popular.
///
/// Seeded (see `ZipfSampler`), and drawn before anything is timed.
func zipfIndices(count: Int, keys: Int, exponent: Double = 0.99, seed: UInt64) -> [Int] {
    let zipf = ZipfSampler(keys: keys, exponent: exponent)
    var generator = SplitMix64(seed: seed)
    return (0..<count).map { _ in zipf.next(using: &generator) }
}

// MARK: - Mixed operations

/// One operation of a mixed workload packed in 32 bits: a key index and whether it is a set.
struct MixedOperation: Sendable {
    private let bits: UInt32

    init(key: Int, isSet: Bool) { bits = UInt32(key) | (isSet ? 1 << 31 : 0) }

    var key: Int { Int(bits & 0x7FFF_FFFF) }
    var isSet: Bool { bits & (1 << 31) != 0 }
}

/// `count` operations on uniformly drawn keys below `keys`; each is a set with probability
/// `setPercent` %, else a get.
func mixedOperations(count: Int, keys: Int, setPercent: Int, seed: UInt64) -> [MixedOperation] {
    var generator = SplitMix64(seed: seed)
    return (0..<count).map { _ in
        let key = Int.random(in: 0..<keys, using: &generator)
        return MixedOperation(key: key, isSet: Int.random(in: 0..<100, using: &generator) < setPercent)
    }
}

// MARK: - Plain threads

/// Runs `body(0)`, …, `body(count - 1)` on `count` new threads (not tasks) released together, and
/// returns the time from their release until the last one finished.
///
/// The caller's task suspends meanwhile, so no thread of the cooperative pool is blocked.
func runOnThreads(_ count: Int, _ body: @escaping @Sendable (_ thread: Int) -> Void) async -> Duration {
    await withCheckedContinuation { continuation in
        let gate = TimedBarrier(count: count, continuation: continuation)
        for number in 0..<count {
            let thread = Thread {
                gate.arrive()
                body(number)
                gate.finish()
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
    }
}

/// Releases a group of threads together once all of them are ready, and reports when the last one
/// is done.
private final class TimedBarrier: @unchecked Sendable {
    // Safe because every stored variable is read and written only while holding `condition`.
    private let condition = NSCondition()
    private let count: Int
    private var ready = 0
    private var finished = 0
    private var start = ContinuousClock.now
    private let continuation: CheckedContinuation<Duration, Never>

    init(count: Int, continuation: CheckedContinuation<Duration, Never>) {
        self.count = count
        self.continuation = continuation
    }

    /// Waits until every thread has arrived; the last one to arrive starts the clock.
    func arrive() {
        condition.lock()
        ready += 1
        if ready == count {
            start = ContinuousClock.now
            condition.broadcast()
        } else {
            while ready < count { condition.wait() }
        }
        condition.unlock()
    }

    /// Counts a thread as done; the last one stops the clock and resumes the waiting task.
    func finish() {
        condition.lock()
        finished += 1
        let isLast = finished == count
        let elapsed = start.duration(to: .now)
        condition.unlock()
        if isLast { continuation.resume(returning: elapsed) }
    }
}

/// Per-thread results, each written once by its thread and read after all of them finished.
final class ThreadResults: @unchecked Sendable {
    // Safe because `values` is only read and written while holding `lock`.
    private let lock = NSLock()
    private var values: [UInt64]

    init(count: Int) { values = Array(repeating: 0, count: count) }

    func set(_ value: UInt64, at thread: Int) { lock.withLock { values[thread] = value } }

    var sum: UInt64 { lock.withLock { values.reduce(0, &+) } }
}
