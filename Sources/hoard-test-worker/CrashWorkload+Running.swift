import Foundation
import Hoard
import HoardTestSupport

extension CrashWorkload {
    /// Runs the workload that `arguments` (a `Setup`'s) describe, for a test that kills the process.
    ///
    /// Each operation is reported as a `Record` *before* it starts, so the test knows every operation
    /// that may have reached the disk; a read that disagrees with what this process set is reported
    /// as a mismatch.
    static func run(arguments: [String]) async throws {
        guard let setup = Setup(arguments: arguments) else { Worker.usage() }
        let cache = try stringCache(
            folder: setup.folder,
            container: setup.container,
            maxRamCount: setup.maxRamCount,
            maxDiskCount: setup.maxDiskCount,
            policy: setup.policy
        )
        var generator = SplitMix64(seed: setup.seed)
        var latest: [String: String] = [:]
        for seq in 1...max(1, setup.operations) {
            let roll = generator.next() % 100
            let key = Self.key(Int(generator.next() % UInt64(Self.keyCount)))
            switch roll {
            case 0..<55:
                let length = Int(generator.next() % 3_000)
                let value = Self.value(key: key, seq: seq, length: length)
                if length % 8 == 0 {
                    // A durable set: once it returns, the value must survive the kill.
                    emit(.save(key: key, seq: seq, length: length))
                    do {
                        try await cache.save(value, forKey: key)
                        emit(.saved(key: key, seq: seq))
                    } catch {
                        emit(.mismatch("save \(key) #\(seq) failed: \(error)"))
                    }
                } else {
                    emit(.set(key: key, seq: seq, length: length))
                    cache[key] = value
                }
                latest[key] = value
            case 55..<70:
                emit(.remove(key: key, seq: seq))
                cache[key] = nil
                latest[key] = nil
            case 70..<88:
                // With fewer disk slots than keys, the disk evicts and a read may miss a value it was given.
                let read = cache[key]
                if read != latest[key] && !(read == nil && setup.mayEvict) {
                    let expected = latest[key]?.prefix(40) ?? "nil"
                    emit(.mismatch("read \(key): \(read?.prefix(40) ?? "nil") instead of \(expected)"))
                }
            case 88..<95:
                emit(.flush(seq: seq))
                await cache.flush()
                emit(.flushed(seq: seq))
            case 95..<99:
                emit(.clearMemory(seq: seq))
                cache.clearMemory()
            default:
                emit(.removeAll(seq: seq))
                cache.removeAll()
                latest.removeAll()
            }
        }
        emit(.end)
    }
}

/// Writes a record's line to standard output with a single system call.
private func emit(_ record: CrashWorkload.Record) { emit(record.line) }
