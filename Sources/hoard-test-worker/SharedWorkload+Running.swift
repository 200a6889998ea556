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
        let cache = try stringCache(
            folder: setup.folder,
            container: setup.container,
            maxRamCount: setup.maxRamCount,
            maxDiskCount: setup.maxDiskCount,
            policy: setup.policy
        )
        var generator = SplitMix64(seed: setup.seed)
        func report(_ record: CrashWorkload.Record) { emit(line(record, at: now())) }
        for local in 1...max(1, setup.operations) {
            let seq = worker * seqStride + local
            let roll = generator.next() % 100
            let key = CrashWorkload.key(Int(generator.next() % UInt64(CrashWorkload.keyCount)))
            switch roll {
            case 0..<50:
                let length = Int(generator.next() % 2_000)
                let value = CrashWorkload.value(key: key, seq: seq, length: length)
                if length % 8 == 0 {
                    report(.save(key: key, seq: seq, length: length))
                    do {
                        try await cache.save(value, forKey: key)
                        report(.saved(key: key, seq: seq))
                    } catch {
                        report(.mismatch("save \(key) #\(seq) failed: \(error)"))
                    }
                } else {
                    report(.set(key: key, seq: seq, length: length))
                    cache[key] = value
                }
            case 50..<65:
                report(.remove(key: key, seq: seq))
                cache[key] = nil
            case 65..<88:
                if let read = cache[key], !isIntact(read, of: key) {
                    report(.mismatch("read \(key): \(read.prefix(60))"))
                }
            case 88..<95:
                report(.flush(seq: seq))
                await cache.flush()
                report(.flushed(seq: seq))
            case 95..<99:
                report(.clearMemory(seq: seq))
                cache.clearMemory()
            default:
                report(.removeAll(seq: seq))
                cache.removeAll()
            }
        }
        report(.end)
    }

    /// Whether `value` is one that some worker set for `key`.
    private static func isIntact(_ value: String, of key: String) -> Bool {
        let fields = value.split(separator: "|", maxSplits: 2, omittingEmptySubsequences: false)
        guard fields.count == 3, fields[0] == key, let seq = Int(fields[1]) else { return false }
        return CrashWorkload.value(key: key, seq: seq, length: fields[2].count) == value
    }
}
