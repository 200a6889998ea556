import Foundation
import Hoard

/// `memory-set-anatomy`: prices the parts of an evicting set, to show where Hoard's time goes.
///
/// The same 200k distinct String keys as `memory-set`, through Hoard and through variants of the
/// plain LRU that add one of Hoard's costs at a time, next to the bare price of the pieces: one
/// String hash, one uncontended lock, and the two public getters Hoard reads on every eviction
/// (`Cache.delegate`, `HoardLogger.output`). Not a target; an aid for changing the library.
enum MemorySetAnatomy {
    static let hoard = "Hoard Cache<Int> lru set"
    static let plain = "plain LRU set (2 table ops)"
    static let hoardLookups = "plain LRU, Hoard's 5 table ops"
    static let sparse = "plain LRU, table sized 2×"
    static let hash = "String.hashValue"
    static let lock = "lock + unlock"
    static let delegate = "Cache.delegate getter"
    static let logger = "HoardLogger.output getter"

    static func run(_ context: BenchContext) async throws -> ScenarioReport {
        let capacity = context.size(10_000)
        let setCount = context.size(200_000)
        let keys = makeKeys(setCount)
        var report = ScenarioReport(
            name: "memory-set-anatomy",
            title:
                "what one evicting set costs: \(grouped(setCount)) distinct String keys into \(grouped(capacity)) "
                + "entries, and the pieces alone"
        )
        var checksum: UInt64 = 0
        var rows: [Contender] = [
            Contender(label: hoard, operations: setCount) {
                let cache = try memoryOnlyCache(capacity: capacity, policy: .lru)
                let elapsed = time { for (value, key) in keys.enumerated() { cache[key] = value } }
                checksum &+= UInt64(cache.memoryCount)
                return elapsed
            }
        ]
        for (label, variant) in [(plain, 0), (hoardLookups, 1), (sparse, 2)] {
            rows.append(
                Contender(label: label, operations: setCount) {
                    let lru = PlainLRU<String, Int>(
                        capacity: capacity,
                        tableCapacity: variant == 2 ? 2 * capacity : nil
                    )
                    var evictions = 0
                    let elapsed = time {
                        if variant == 1 {
                            for (value, key) in keys.enumerated() where lru.setWithHoardLookups(value, forKey: key) {
                                evictions += 1
                            }
                        } else {
                            for (value, key) in keys.enumerated() where lru.set(value, forKey: key) { evictions += 1 }
                        }
                    }
                    if evictions != setCount - capacity || lru.value(forKey: keys[setCount - 1]) != setCount - 1 {
                        report.notes.append("\(label): \(evictions) evictions, expected \(setCount - capacity)")
                    }
                    checksum &+= UInt64(evictions)
                    return elapsed
                }
            )
        }
        rows.append(
            Contender(label: hash, operations: setCount) {
                var sum = 0
                let elapsed = time { for key in keys { sum &+= key.hashValue } }
                checksum &+= UInt64(bitPattern: Int64(sum))
                return elapsed
            }
        )
        let plainLock = PlainLock()
        rows.append(
            Contender(label: lock, operations: setCount) {
                var sum = 0
                let elapsed = time {
                    for key in keys {
                        plainLock.lock()
                        sum &+= key.utf8.count
                        plainLock.unlock()
                    }
                }
                checksum &+= UInt64(sum)
                return elapsed
            }
        )
        let cache = try memoryOnlyCache(capacity: capacity, policy: .lfu)
        rows.append(
            Contender(label: delegate, operations: setCount) {
                var found = 0
                let elapsed = time { for _ in keys where cache.delegate != nil { found += 1 } }
                checksum &+= UInt64(found)
                return elapsed
            }
        )
        rows.append(
            Contender(label: logger, operations: setCount) {
                var found = 0
                let elapsed = time { for _ in keys where HoardLogger.output != nil { found += 1 } }
                checksum &+= UInt64(found)
                return elapsed
            }
        )
        report.rows = try await measureInterleaved(rows, plan: context.plan)
        report.reference = hoard
        report.lines.append("nanoseconds per operation (median):")
        for row in report.rows {
            report.lines.append(
                "  \(row.label.padding(toLength: 32, withPad: " ", startingAt: 0))\(pad(String(format: "%.1f", 1e9 / row.median), 7))"
            )
        }
        report.notes.append(
            "the plain LRU rows do no statistics, logging or delegate checks; \"table ops\" are hash-table lookups, "
                + "insertions and removals of String keys, each hashing the key once (a removal also rehashes the keys "
                + "it shifts back)"
        )
        report.checksum = checksum
        return report
    }
}
