import Foundation
import Hoard
import Synchronization

/// `memory-get`: uniform random hits through `cache[key]` on a memory-only cache, single-threaded,
/// against a plain dictionary, a dictionary behind a `Mutex`, and `NSCache`.
enum MemoryGet {
    static let hoardLRU = "Hoard Cache<Int> lru"
    static let hoardLFU = "Hoard Cache<Int> lfu"
    static let hoardWTinyLFU = "Hoard Cache<Int> w-tinylfu"
    static let dictionary = "Dictionary<String, Int>"
    static let mutexDictionary = "Mutex<[String: Int]>"
    static let nsCache = "NSCache<NSString, Box>"
    static let plainLRU = "plain LRU behind one lock"

    static func run(_ context: BenchContext) async throws -> ScenarioReport {
        let keyCount = context.size(100_000)
        let getCount = context.size(1_000_000)
        let keys = makeKeys(keyCount)
        // Generated before anything is timed, so the generator is not measured.
        let indices = uniformIndices(count: getCount, below: keyCount, seed: 0x4D45_4D47)
        // Key i holds the value i, so every row must add up to the same sum.
        let expectedSum = indices.reduce(UInt64(0)) { $0 &+ UInt64($1) }

        var report = ScenarioReport(
            name: "memory-get",
            title: "\(grouped(getCount)) uniform random gets over \(grouped(keyCount)) String keys, all hits, 1 thread"
        )
        var checksum: UInt64 = 0
        func check(_ label: String, _ sum: UInt64) {
            checksum &+= sum
            if sum != expectedSum {
                report.notes.append("\(label): wrong sum \(sum), expected \(expectedSum) (misses?)")
            }
        }

        var rows: [Contender] = []
        for (policy, label) in [(EvictionPolicy.lru, hoardLRU), (.lfu, hoardLFU), (.wTinyLFU, hoardWTinyLFU)] {
            let cache = try memoryOnlyCache(capacity: keyCount, policy: policy)
            for (value, key) in keys.enumerated() { cache[key] = value }
            if cache.memoryCount != keyCount {
                report.notes.append("\(label): memoryCount \(cache.memoryCount) after filling, expected \(keyCount)")
            }
            rows.append(
                Contender(label: label, operations: getCount) {
                    var sum: UInt64 = 0
                    let elapsed = time {
                        for index in indices { sum &+= UInt64(truncatingIfNeeded: cache[keys[index]] ?? -1) }
                    }
                    check(label, sum)
                    return elapsed
                }
            )
        }

        var plain: [String: Int] = [:]
        plain.reserveCapacity(keyCount)
        for (value, key) in keys.enumerated() { plain[key] = value }
        let frozen = plain
        rows.append(
            Contender(label: Self.dictionary, operations: getCount) {
                var sum: UInt64 = 0
                let elapsed = time {
                    for index in indices { sum &+= UInt64(truncatingIfNeeded: frozen[keys[index]] ?? -1) }
                }
                check(Self.dictionary, sum)
                return elapsed
            }
        )

        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
            // Its own storage, not the plain dictionary's: sharing it, this row ran right after the
            // plain dictionary's and found its whole table in the processor's caches, while every other
            // row starts where another row's data filled them.
            var own: [String: Int] = [:]
            own.reserveCapacity(keyCount)
            for (value, key) in keys.enumerated() { own[key] = value }
            let mutex = MutexDictionary(own)
            rows.append(
                Contender(label: mutexDictionary, operations: getCount) {
                    var sum: UInt64 = 0
                    let elapsed = time {
                        for index in indices {
                            sum &+= UInt64(truncatingIfNeeded: mutex.value(forKey: keys[index]) ?? -1)
                        }
                    }
                    check(mutexDictionary, sum)
                    return elapsed
                }
            )
        }

        let lru = PlainLRU<String, Int>(capacity: keyCount)
        for (value, key) in keys.enumerated() { lru.set(value, forKey: key) }
        rows.append(
            Contender(label: plainLRU, operations: getCount) {
                var sum: UInt64 = 0
                let elapsed = time {
                    for index in indices { sum &+= UInt64(truncatingIfNeeded: lru.value(forKey: keys[index]) ?? -1) }
                }
                check(plainLRU, sum)
                return elapsed
            }
        )

        let cache = NSCache<NSString, Box>()
        cache.countLimit = keyCount
        let objectKeys = keys.map { NSString(string: $0) }
        for (value, key) in objectKeys.enumerated() { cache.setObject(Box(value), forKey: key) }
        rows.append(
            Contender(label: nsCache, operations: getCount) {
                var sum: UInt64 = 0
                let elapsed = time {
                    for index in indices {
                        sum &+= UInt64(truncatingIfNeeded: cache.object(forKey: objectKeys[index])?.value ?? -1)
                    }
                }
                check(nsCache, sum)
                return elapsed
            }
        )

        report.rows = try await measureInterleaved(rows, plan: context.plan)
        report.reference = mutexDictionary
        report.comparisons = [
            (hoardLRU, mutexDictionary), (hoardLFU, mutexDictionary), (hoardWTinyLFU, mutexDictionary),
            (hoardLRU, plainLRU), (hoardLFU, plainLRU), (hoardWTinyLFU, plainLRU),
        ]
        for (policy, label) in [("lru", hoardLRU), ("lfu", hoardLFU)] {
            let row = report.row(label)
            report.targets += [
                .rate("memory get-hit (\(policy)) ≥ 4 M/s", row, atLeast: 4e6),
                .ratio(
                    "memory get-hit (\(policy)) ≥ 0.45× Mutex<Dictionary>",
                    row,
                    report.row(mutexDictionary),
                    atLeast: 0.45
                ),
                .ratio(
                    "memory get-hit (\(policy)) ≥ 1× plain LRU behind one lock",
                    row,
                    report.row(plainLRU),
                    atLeast: 1
                ),
            ]
        }
        // The default policy does more per hit (a sketch increment on main hits, the sampled experts):
        // its bar against the plain LRU is 0.9×.
        let adaptive = report.row(hoardWTinyLFU)
        report.targets += [
            .ratio(
                "memory get-hit (w-tinylfu, the default) ≥ 0.45× Mutex<Dictionary>",
                adaptive,
                report.row(mutexDictionary),
                atLeast: 0.45
            ),
            .ratio(
                "memory get-hit (w-tinylfu, the default) ≥ 0.9× plain LRU behind one lock",
                adaptive,
                report.row(plainLRU),
                atLeast: 0.9
            ),
        ]
        report.summary = [
            ("memory get-hit (lru)", hoardLRU),
            ("memory get-hit (lfu)", hoardLFU),
            ("memory get-hit (w-tinylfu)", hoardWTinyLFU),
            ("memory get-hit baseline Mutex<[String: Int]>", mutexDictionary),
            ("memory get-hit baseline Dictionary<String, Int>", Self.dictionary),
            ("memory get-hit baseline NSCache", nsCache),
            ("memory get-hit baseline plain LRU behind one lock", plainLRU),
        ]
        report.checksum = checksum
        return report
    }
}

/// The `Mutex` baseline: a dictionary behind `Synchronization.Mutex`, read the way a simple
/// thread-safe cache would read it.
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
final class MutexDictionary: Sendable {
    private let storage: Mutex<[String: Int]>

    init(_ dictionary: [String: Int]) { storage = Mutex(dictionary) }

    func value(forKey key: String) -> Int? { storage.withLock { $0[key] } }

    func set(_ value: Int, forKey key: String) { storage.withLock { $0[key] = value } }
}

/// A value boxed for `NSCache`, which holds objects only.
final class Box {
    let value: Int
    init(_ value: Int) { self.value = value }
}

/// `memory-set`: sets of distinct keys into a full memory-only cache, so every set after the first
/// `capacity` ones evicts.
enum MemorySet {
    static let hoardLRU = "Hoard Cache<Int> lru"
    static let hoardLFU = "Hoard Cache<Int> lfu"
    static let hoardWTinyLFU = "Hoard Cache<Int> w-tinylfu"
    static let plainLRU = "plain LRU behind one lock"

    static func run(_ context: BenchContext) async throws -> ScenarioReport {
        let capacity = context.size(10_000)
        let setCount = context.size(200_000)
        let keys = makeKeys(setCount)
        var report = ScenarioReport(
            name: "memory-set",
            title:
                "\(grouped(setCount)) sets of distinct String keys into a memory-only cache of \(grouped(capacity)) (evicts from set \(grouped(capacity + 1)) on)"
        )
        var checksum: UInt64 = 0
        var rows = [(EvictionPolicy.lru, hoardLRU), (.lfu, hoardLFU), (.wTinyLFU, hoardWTinyLFU)].map { policy, label in
            Contender(label: label, operations: setCount) {
                // A fresh cache per run, built before the clock starts.
                let cache = try memoryOnlyCache(capacity: capacity, policy: policy)
                let elapsed = time {
                    for (value, key) in keys.enumerated() { cache[key] = value }
                }
                let last = cache[keys[setCount - 1]] ?? -1
                checksum &+= UInt64(cache.memoryCount) &+ UInt64(truncatingIfNeeded: last)
                if cache.memoryCount != capacity || last != setCount - 1 {
                    report.notes.append("\(label): memoryCount \(cache.memoryCount), last value \(last) after the run")
                }
                return elapsed
            }
        }
        rows.append(
            Contender(label: plainLRU, operations: setCount) {
                let lru = PlainLRU<String, Int>(capacity: capacity)
                var evictions = 0
                let elapsed = time {
                    for (value, key) in keys.enumerated() where lru.set(value, forKey: key) { evictions += 1 }
                }
                let last = lru.value(forKey: keys[setCount - 1]) ?? -1
                checksum &+= UInt64(lru.entryCount) &+ UInt64(truncatingIfNeeded: last) &+ UInt64(evictions)
                if lru.entryCount != capacity || last != setCount - 1 || evictions != setCount - capacity {
                    report.notes.append(
                        "\(plainLRU): \(lru.entryCount) entries, last value \(last), \(evictions) evictions after the run"
                    )
                }
                return elapsed
            }
        )
        report.rows = try await measureInterleaved(rows, plan: context.plan)
        report.reference = plainLRU
        report.summary = [
            ("memory set-evict (lru)", hoardLRU),
            ("memory set-evict (lfu)", hoardLFU),
            ("memory set-evict (w-tinylfu)", hoardWTinyLFU),
            ("memory set-evict baseline plain LRU behind one lock", plainLRU),
        ]
        report.targets = [
            .rate("memory set with eviction (lru) ≥ 3 M/s", report.row(hoardLRU), atLeast: 3e6),
            .rate("memory set with eviction (lfu) ≥ 3 M/s", report.row(hoardLFU), atLeast: 3e6),
            .rate("memory set with eviction (w-tinylfu, the default) ≥ 3 M/s", report.row(hoardWTinyLFU), atLeast: 3e6),
        ]
        report.checksum = checksum
        return report
    }
}
