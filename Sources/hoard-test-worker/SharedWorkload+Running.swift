import Foundation
import Hoard
import HoardTestSupport

extension SharedWorkload {
    /// Runs one worker of the multi-process crash workload:
    /// `shared <worker> <folder> <container> <seed> <operations> <maxDiskCount> <maxRamCount> <policy>`.
    ///
    /// The operations are the crash workload's; a read must find a miss or an intact value of its own
    /// key (another process may have written it), or it is reported as a mismatch.
    static func run(arguments: [String]) async throws {
        guard let worker = Int(argument(arguments, 0)),
            let setup = CrashWorkload.Setup(arguments: Array(arguments.dropFirst()))
        else { Worker.usage() }
        var intact = IntactValues()
        let operations = RandomOperations(setsBelow: 50, removesBelow: 65, lengthLimit: 2_000)
        try await operations.run(setup, seq: { worker * seqStride + $0 }, check: &intact) { record in
            emit(line(record, at: now()))
        }
    }
}

/// Values any worker may have set: a read must find a miss or one of them, intact.
private struct IntactValues: ReadCheck {
    func mismatch(reading read: String?, forKey key: String) -> String? {
        guard let read, !Self.isIntact(read, of: key) else { return nil }
        return String(read.prefix(60))
    }

    /// Whether `value` is one that some worker set for `key`.
    private static func isIntact(_ value: String, of key: String) -> Bool {
        let fields = value.split(separator: "|", maxSplits: 2, omittingEmptySubsequences: false)
        guard fields.count == 3, fields[0] == key, let seq = Int(fields[1]) else { return false }
        return CrashWorkload.value(key: key, seq: seq, length: fields[2].count) == value
    }
}
