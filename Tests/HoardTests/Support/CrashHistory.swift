import Foundation
import HoardTestSupport

@testable import Hoard

/// What a crash may leave for each key, from the records the killed worker printed.
///
/// A flush that returned (`D`) confirms every operation before it started (`F`): after the crash,
/// a key holds what its last operation before that flush left, or what any later operation on it
/// left (it may have landed). A save that returned (`W`) confirms itself the same way for its key:
/// the key holds that save's value or what a later operation on it left. A removal, a clear and no operation at all leave a miss; with fewer
/// disk slots than keys a miss is always possible (an eviction).
struct CrashHistory {
    enum Outcome: Hashable, CustomStringConvertible {
        case miss
        case value(seq: Int, length: Int)

        var description: String {
            switch self {
            case .miss: "a miss"
            case .value(let seq, _): "set #\(seq)"
            }
        }
    }

    /// The outcomes each key may show, by key.
    private(set) var allowed: [String: Set<Outcome>] = [:]
    private(set) var confirmedFlushes = 0
    private(set) var confirmedSaves = 0
    private(set) var failures: [String] = []
    private(set) var hasEnded = false
    private(set) var operationCount = 0

    /// Reads the worker's records (`CrashWorkload.Record` lines) for a workload on `keyCount` keys.
    init(records: [String], keyCount: Int) {
        let keys = (0..<keyCount).map(CrashWorkload.key)
        var operations: [String: [(position: Int, outcome: Outcome)]] = [:]
        var flushStarts: [Int: Int] = [:]
        var saveStarts: [String: Int] = [:]
        var confirmedUpTo = -1
        // For each key, the position of its latest save that returned: confirmed up to and with it.
        var savedThrough: [String: Int] = [:]
        for (position, line) in records.enumerated() {
            switch CrashWorkload.Record(line: line) {
            case .set(let key, let seq, let length):
                operations[key, default: []].append((position, .value(seq: seq, length: length)))
                operationCount += 1
            case .save(let key, let seq, let length):
                operations[key, default: []].append((position, .value(seq: seq, length: length)))
                saveStarts["\(key) \(seq)"] = position
                operationCount += 1
            case .saved(let key, let seq):
                guard let start = saveStarts["\(key) \(seq)"] else {
                    failures.append("worker: \(line)")
                    continue
                }
                savedThrough[key] = max(savedThrough[key] ?? -1, start)
                confirmedSaves += 1
            case .remove(let key, _):
                operations[key, default: []].append((position, .miss))
                operationCount += 1
            case .removeAll:
                for key in keys { operations[key, default: []].append((position, .miss)) }
                operationCount += 1
            case .clearMemory:
                operationCount += 1
            case .flush(let seq):
                flushStarts[seq] = position
                operationCount += 1
            case .flushed(let seq):
                guard let start = flushStarts[seq] else {
                    failures.append("worker: \(line)")
                    continue
                }
                confirmedUpTo = start
                confirmedFlushes += 1
            case .end:
                hasEnded = true
            case .mismatch, nil:
                failures.append("worker: \(line)")
            }
        }
        for key in keys {
            let history = operations[key] ?? []
            // Operations before `cutoff` are confirmed: only the last of them may show, or a later one.
            let cutoff = max(confirmedUpTo, (savedThrough[key] ?? -2) + 1)
            var outcomes: Set<Outcome> = [history.last { $0.position < cutoff }?.outcome ?? .miss]
            for operation in history where operation.position >= cutoff { outcomes.insert(operation.outcome) }
            allowed[key] = outcomes
        }
    }

    private static func describe(_ outcomes: Set<Outcome>) -> String {
        outcomes.map(\.description).sorted().joined(separator: ", ")
    }

    /// Why `value` is not something `key` may hold after the crash, or `nil` when it may.
    func problem(key: String, value: String?, mayEvict: Bool) -> String? {
        let allowed = allowed[key] ?? [.miss]
        guard let value else {
            return allowed.contains(.miss) || mayEvict
                ? nil : "\(key) is missing; it may only hold \(Self.describe(allowed))"
        }
        let fields = value.split(separator: "|", maxSplits: 2, omittingEmptySubsequences: false)
        guard fields.count == 3, fields[0] == key, let seq = Int(fields[1]) else {
            return "\(key) holds a value that is not its own: \(value.prefix(60))"
        }
        let outcome = Outcome.value(seq: seq, length: fields[2].count)
        guard CrashWorkload.value(key: key, seq: seq, length: fields[2].count) == value else {
            return "\(key) holds garbage: \(value.prefix(60))"
        }
        guard allowed.contains(outcome) else {
            return "\(key) holds set #\(seq), which was never set or was superseded by a confirmed flush; "
                + "it may only hold \(Self.describe(allowed))"
        }
        return nil
    }
}
