import Foundation
import Hoard
import HoardTestSupport

/// The random operations of the crash workloads, one process's (`crash`) and several processes'
/// (`shared`): sets (one in eight a durable save), removals, reads, flushes, memory clears and
/// clears, drawn from a generator seeded with the setup's seed.
struct RandomOperations {
    /// Rolls (of 100) below this set a value.
    let setsBelow: UInt64
    /// Rolls from ``setsBelow`` up to this remove one; the rest read up to 88, flush up to 95, clear
    /// the memory up to 99, and clear the cache at 99.
    let removesBelow: UInt64
    /// Values are shorter than this many characters.
    let lengthLimit: UInt64

    /// Opens the setup's cache and runs its operations on it, reporting each one before it starts,
    /// so that the test knows every operation that may have reached the disk, and each read that
    /// `check` finds wrong as a mismatch.
    ///
    /// - Parameters:
    ///   - setup: The cache and the seed.
    ///   - seq: The sequence number of the operation of that index (from 1).
    ///   - check: Hears of this process's changes and judges each value read.
    ///   - report: Sends a record to the test.
    /// - Throws: What opening the cache throws.
    func run(
        _ setup: CrashWorkload.Setup,
        seq: (Int) -> Int = { $0 },
        check: inout some ReadCheck,
        report: (CrashWorkload.Record) -> Void
    ) async throws {
        let cache = try stringCache(
            folder: setup.folder,
            container: setup.container,
            maxRamCount: setup.maxRamCount,
            maxDiskCount: setup.maxDiskCount,
            policy: setup.policy,
            maxDiskBytes: setup.maxDiskBytes
        )
        var generator = SplitMix64(seed: setup.seed)
        for index in 1...max(1, setup.operations) {
            let seq = seq(index)
            let roll = generator.next() % 100
            let key = CrashWorkload.key(Int(generator.next() % UInt64(CrashWorkload.keyCount)))
            switch roll {
            case 0..<setsBelow:
                let length = Int(generator.next() % lengthLimit)
                let value = CrashWorkload.value(key: key, seq: seq, length: length)
                if length % 8 == 0 {
                    // A durable set: once it returns, the value must survive the kill.
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
                check.didSet(value, forKey: key)
            case setsBelow..<removesBelow:
                report(.remove(key: key, seq: seq))
                cache[key] = nil
                check.didSet(nil, forKey: key)
            case removesBelow..<88:
                if let mismatch = check.mismatch(reading: cache[key], forKey: key) {
                    report(.mismatch("read \(key): \(mismatch)"))
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
                check.didRemoveAll()
            }
        }
        report(.end)
    }
}

/// How a workload judges its reads: it hears of every change this process makes.
protocol ReadCheck {
    /// This process set `value` for `key` (or removed it, for `nil`).
    mutating func didSet(_ value: String?, forKey key: String)
    /// This process removed every value.
    mutating func didRemoveAll()
    /// What is wrong with reading `read` for `key`, or `nil` when it is right.
    func mismatch(reading read: String?, forKey key: String) -> String?
}

extension ReadCheck {
    mutating func didSet(_ value: String?, forKey key: String) {}
    mutating func didRemoveAll() {}
}
