import Foundation
import Hoard
import HoardTestSupport

/// A random workload of sets, removals, reads, clears and flushes, for a test that kills the process.
///
/// Each operation is reported *before* it starts, so the test knows every operation that may have
/// reached the disk:
/// ```
/// S <key> <seq> <length>   a set of crashValue(key, seq, length) starts
/// R <key> <seq>            a removal starts
/// C <seq>                  removeAll() starts (a removal of every key)
/// M <seq>                  clearMemory() starts (the disk is untouched)
/// F <seq>                  flush() starts
/// D <seq>                  the flush that started as F <seq> returned
/// X <message>              a read disagreed with what this process set (a failure)
/// E                        the workload ended without being killed
/// ```
struct CrashWorkload {
    let folder: String
    let container: String
    let seed: UInt64
    let operations: Int
    let maxDiskCount: Int
    let maxRamCount: Int
    let policy: EvictionPolicy

    /// The keys the workload uses.
    static let keyCount = 24

    init(arguments: [String]) {
        folder = argument(arguments, 0)
        container = argument(arguments, 1)
        seed = UInt64(argument(arguments, 2)) ?? 0
        operations = Int(argument(arguments, 3)) ?? 0
        maxDiskCount = Int(argument(arguments, 4)) ?? 1
        maxRamCount = Int(argument(arguments, 5)) ?? 1
        policy = argument(arguments, 6) == "lru" ? .lru : .lfu
    }

    /// The value a set writes: it names its key and sequence number, so no two sets write the same value.
    static func value(key: String, seq: Int, length: Int) -> String {
        let filler = Character(Unicode.Scalar(UInt8(97 + seq % 26)))
        return "\(key)|\(seq)|" + String(repeating: filler, count: length)
    }

    func run() async throws {
        let cache = try stringCache(
            folder: folder,
            container: container,
            maxRamCount: maxRamCount,
            maxDiskCount: maxDiskCount,
            policy: policy
        )
        // With fewer disk slots than keys, the disk evicts and a read may miss a value it was given.
        let mayEvict = maxDiskCount < Self.keyCount
        var generator = SplitMix64(seed: seed)
        var latest: [String: String] = [:]
        for seq in 1...max(1, operations) {
            let roll = generator.next() % 100
            let key = "k\(generator.next() % UInt64(Self.keyCount))"
            switch roll {
            case 0..<55:
                let length = Int(generator.next() % 3_000)
                emit("S \(key) \(seq) \(length)")
                let value = Self.value(key: key, seq: seq, length: length)
                cache[key] = value
                latest[key] = value
            case 55..<70:
                emit("R \(key) \(seq)")
                cache[key] = nil
                latest[key] = nil
            case 70..<88:
                let read = cache[key]
                if read != latest[key] && !(read == nil && mayEvict) {
                    emit("X read \(key): \(read?.prefix(40) ?? "nil") instead of \(latest[key]?.prefix(40) ?? "nil")")
                }
            case 88..<95:
                emit("F \(seq)")
                await cache.flush()
                emit("D \(seq)")
            case 95..<99:
                emit("M \(seq)")
                cache.clearMemory()
            default:
                emit("C \(seq)")
                cache.removeAll()
                latest.removeAll()
            }
        }
        emit("E")
    }
}
