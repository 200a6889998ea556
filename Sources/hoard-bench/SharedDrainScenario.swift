import Foundation
import Hoard

/// `shared-drain`: how fast a cache hands a backlog of writes to its shared level once the level
/// answers again, for a small backlog and one ten times larger.
///
/// A shared level that stalls (a slow or paused server) lets the writes of distinct keys pile up in
/// the cache's queue; when it answers again, the backlog drains while `flush()` waits and while new
/// sets queue behind it. The level here holds every write until it is opened, then answers at once,
/// so the figure is the queue's own cost per write: a queue whose cost grows with its length drains
/// the larger backlog at a lower rate.
enum SharedDrain {
    static func run(_ context: BenchContext) async throws -> ScenarioReport {
        let small = context.size(10_000)
        let large = small * 10
        var report = ScenarioReport(
            name: "shared-drain",
            title: "a backlog of \(grouped(small)) and of \(grouped(large)) queued shared-level writes, "
                + "drained while flush() waits"
        )
        let smallLabel = "drain of \(grouped(small)) writes"
        let largeLabel = "drain of \(grouped(large)) writes"
        report.rows = try await measureInterleaved(
            [
                Contender(label: smallLabel, operations: small) { try await drain(small, notes: &report.notes) },
                Contender(label: largeLabel, operations: large) { try await drain(large, notes: &report.notes) },
            ],
            plan: context.plan
        )
        report.reference = smallLabel
        report.comparisons = [(largeLabel, smallLabel)]
        report.summary = [
            ("shared-level backlog drain, \(grouped(small)) writes", smallLabel),
            ("shared-level backlog drain, \(grouped(large)) writes", largeLabel),
        ]
        report.targets = [
            .ratio(
                "a 10× larger backlog drains at ≥ 0.5× the rate (no cost growing with the queue)",
                report.row(largeLabel),
                report.row(smallLabel),
                atLeast: 0.5
            )
        ]
        return report
    }

    /// Queues `count` writes of distinct keys behind a held level, then opens it and times the
    /// drain, up to `flush()` returning.
    private static func drain(_ count: Int, notes: inout [String]) async throws -> Duration {
        let level = HeldLevel()
        let cache = try CacheBuilder<Data>(serializer: DataSerializer())
            .maxRamCount(count + 1)
            .maxDiskCount(0)
            .sharedLevel(level)
            .build()
        let payload = Data(repeating: 7, count: 16)
        for index in 0..<count { cache["k\(index)"] = payload }
        let start = ContinuousClock.now
        level.open()
        await cache.flush()
        let elapsed = ContinuousClock.now - start
        if level.writes != count { notes.append("the level got \(level.writes) writes of \(count)") }
        return elapsed
    }
}

/// A shared level that holds every write until ``open()``, then answers each at once.
private final class HeldLevel: CacheLevel, Sendable {
    private struct State {
        var isOpen = false
        var held: [CheckedContinuation<Void, Never>] = []
        var writes = 0
    }

    private let state = Locked(State())

    var writes: Int { state.withLock { $0.writes } }

    func open() {
        let held = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.isOpen = true
            defer { state.held = [] }
            return state.held
        }
        for continuation in held { continuation.resume() }
    }

    func get(_ key: String) async throws -> Data { throw CacheError.notFound(key: key) }

    func set(_ value: Data, forKey key: String) async throws {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let isOpen = state.withLock { state -> Bool in
                state.writes += 1
                if state.isOpen { return true }
                state.held.append(continuation)
                return false
            }
            if isOpen { continuation.resume() }
        }
    }

    func removeValue(forKey key: String) async throws {}

    func clear() async {}

    func onMemoryWarning() {}
}
