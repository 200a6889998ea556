import Foundation
import HoardTestSupport

/// What several processes that wrote one container may have left for each key, from their
/// timestamped records (see `SharedWorkload`) and the times they died.
///
/// An operation starts after its record's time and, once confirmed (by a flush of its process that
/// started after it and returned, or by its own save that returned), has landed by the
/// confirmation's time; otherwise it may land until its process died, or never. A key's final
/// outcome may be that of operation `p` unless a confirmed operation `q` on the key started after
/// `p` had surely landed (after `p`'s confirmation, or after its process died), or `q` is a later
/// confirmed operation of `p`'s own process (a process lands its operations on a key in order).
/// The empty container counts as an operation that landed at time 0.
struct SharedHistory {
    struct Operation {
        var worker: Int
        var start: UInt64
        var outcome: CrashHistory.Outcome
        /// When the operation had surely landed, if it was confirmed.
        var confirmed: UInt64?
    }

    private(set) var operations: [String: [Operation]] = [:]
    private(set) var failures: [String] = []
    private(set) var confirmedFlushes = 0
    private(set) var confirmedSaves = 0
    /// When each worker had surely died.
    private let deaths: [UInt64]

    /// Reads each worker's output lines; `deaths[w]` is a time when worker `w` was surely dead.
    init(lines: [[String]], deaths: [UInt64]) {
        self.deaths = deaths
        for (worker, output) in lines.enumerated() {
            var saves: [String: (key: String, index: Int)] = [:]
            var flushes: [Int: Int] = [:]  // flush seq → how many operations it covers
            var unflushed: [(key: String, index: Int)] = []  // the process's operations, in order
            for line in output {
                guard let (time, record) = SharedWorkload.parse(line) else {
                    if line != output.last { failures.append("worker \(worker): \(line)") }
                    continue
                }
                func add(_ key: String, _ outcome: CrashHistory.Outcome) -> Int {
                    operations[key, default: []].append(Operation(worker: worker, start: time, outcome: outcome))
                    return operations[key]!.count - 1
                }
                switch record {
                case .set(let key, let seq, let length):
                    unflushed.append((key, add(key, .value(seq: seq, length: length))))
                case .save(let key, let seq, let length):
                    let index = add(key, .value(seq: seq, length: length))
                    unflushed.append((key, index))
                    saves["\(key) \(seq)"] = (key, index)
                case .saved(let key, let seq):
                    guard let save = saves["\(key) \(seq)"] else {
                        failures.append("worker \(worker): \(line)")
                        continue
                    }
                    confirm(save, at: time)
                    confirmedSaves += 1
                case .remove(let key, _):
                    unflushed.append((key, add(key, .miss)))
                case .removeAll:
                    for key in CrashWorkload.keys { unflushed.append((key, add(key, .miss))) }
                case .flush(let seq):
                    flushes[seq] = unflushed.count
                case .flushed(let seq):
                    guard let covered = flushes[seq] else {
                        failures.append("worker \(worker): \(line)")
                        continue
                    }
                    for operation in unflushed.prefix(covered) { confirm(operation, at: time) }
                    confirmedFlushes += 1
                case .clearMemory, .end:
                    break
                case .mismatch(let message):
                    failures.append("worker \(worker): \(message)")
                }
            }
        }
    }

    private mutating func confirm(_ operation: (key: String, index: Int), at time: UInt64) {
        let current = operations[operation.key]![operation.index].confirmed
        operations[operation.key]![operation.index].confirmed = min(current ?? time, time)
    }

    /// The outcomes `key` may show.
    func allowed(_ key: String) -> Set<CrashHistory.Outcome> {
        let history = operations[key] ?? []
        let confirmed = history.filter { $0.confirmed != nil }
        var allowed: Set<CrashHistory.Outcome> = confirmed.isEmpty ? [.miss] : []
        for operation in history {
            let landedBy = min(operation.confirmed ?? .max, deaths[operation.worker])
            let superseded = confirmed.contains { other in
                other.start > landedBy
                    || (other.worker == operation.worker && other.start > operation.start)
            }
            if !superseded { allowed.insert(operation.outcome) }
        }
        return allowed
    }

    /// Why `value` is not something `key` may hold, or `nil` when it may.
    func problem(key: String, value: String?, mayEvict: Bool) -> String? {
        let allowed = allowed(key)
        let shown = allowed.map(\.description).sorted().joined(separator: ", ")
        guard let value else {
            return allowed.contains(.miss) || mayEvict ? nil : "\(key) is missing; it may only hold \(shown)"
        }
        let fields = value.split(separator: "|", maxSplits: 2, omittingEmptySubsequences: false)
        guard fields.count == 3, fields[0] == key, let seq = Int(fields[1]),
            CrashWorkload.value(key: key, seq: seq, length: fields[2].count) == value
        else { return "\(key) holds a damaged or foreign value: \(value.prefix(60))" }
        guard allowed.contains(.value(seq: seq, length: fields[2].count)) else {
            return "\(key) holds set #\(seq) (worker \(SharedWorkload.worker(ofSeq: seq))), older than a confirmed "
                + "write or never set; it may only hold \(shown)"
        }
        return nil
    }
}
