import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Stress: 16 tasks hammering one cache with every kind of operation on a domain
/// of one to four keys, memory and disk both on and both small enough to evict, for each policy.
///
/// Every value read must be one written (or fetched) for the key that was asked for; afterwards the
/// two levels agree on every key they both hold, and a restart serves only such values too.
///
/// `HOARD_STRESS_ROUNDS=n` multiplies the operations per task (default 1 000, which keeps `swift test`
/// quick; 10 000 per task is `HOARD_STRESS_ROUNDS=10`).
@Suite(.timeLimit(.minutes(10)), .validatesCacheInvariants)
struct StressTests {
    init() { TestLog.install() }

    static let taskCount = 16
    static var operationsPerTask: Int { 1_000 * StressScale.rounds }

    /// A value written by task `task` as its `sequence`-th operation, for `key`.
    static func value(key: String, task: Int, sequence: Int) -> String { "\(key)|t\(task)|n\(sequence)" }

    /// What the fetcher returns for `key`.
    static func fetched(_ key: String) -> String { "\(key)|fetched" }

    /// Whether `value` is one of the values ever written or fetched for `key`.
    static func belongs(_ value: String, to key: String) -> Bool {
        let parts = value.split(separator: "|", omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0] == key else { return false }
        if parts.count == 2 { return parts[1] == "fetched" }
        guard parts.count == 3, let task = Int(parts[1].dropFirst()), let sequence = Int(parts[2].dropFirst()) else {
            return false
        }
        return parts[1].first == "t" && parts[2].first == "n" && (0..<taskCount).contains(task)
            && (0..<operationsPerTask).contains(sequence)
    }

    @Test(arguments: EvictionPolicy.allCases, [1, 2, 3, 4])
    func valuesAlwaysBelongToTheirKey(policy: EvictionPolicy, domainSize: Int) async throws {
        let folder = TemporaryDirectory()
        let keys = (0..<domainSize).map { "key\($0)" }
        let wrong = Protected<[String]>([])
        let cache = try folder.stringBuilder().evictionPolicy(policy).maxRamCount(2).maxDiskCount(3)
            .fetcher { key in Self.fetched(key) }.build()
        func check(_ value: String?, _ key: String) {
            if let value, !Self.belongs(value, to: key) { wrong.withLock { $0.append("\(key) → \(value)") } }
        }
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<Self.taskCount {
                group.addTask {
                    var random = SplitMix64(seed: UInt64(task * 1_000 + domainSize))
                    for sequence in 0..<Self.operationsPerTask {
                        let key = keys[Int.random(in: 0..<keys.count, using: &random)]
                        switch Int.random(in: 0..<1_000, using: &random) {
                        case 0..<250: check(cache[key], key)
                        case 250..<300: check(cache.value(forKey: key), key)
                        case 300..<550: cache[key] = Self.value(key: key, task: task, sequence: sequence)
                        case 550..<650: cache.removeValue(forKey: key)
                        case 650..<800: check(try? await cache.getOrFetch(forKey: key), key)
                        case 800..<950: _ = cache.contains(key)
                        case 950..<980:
                            for listed in cache.allKeys where !keys.contains(listed) {
                                wrong.withLock { $0.append("allKeys listed \(listed)") }
                            }
                        case 980..<995: cache.clearMemory()
                        case 995..<998: await cache.flush()
                        default: cache.removeAll()
                        }
                    }
                }
            }
        }
        #expect(wrong.withLock { $0 }.isEmpty, "\(wrong.withLock { $0.prefix(10) })")

        // Quiet now: where both levels hold a key, they hold the same value.
        await cache.flush()
        #expect(cache.diskCount <= 3)
        #expect(cache.memoryCount <= 2)
        for key in keys {
            let inMemory = cache.memory?.value(forKey: key)?.value
            var onDisk: String?
            if case .stored(let entry) = cache.disk?.lookup(DiskKey(key)) {
                onDisk = String(decoding: entry.payload, as: UTF8.self)
            }
            check(inMemory, key)
            check(onDisk, key)
            if let inMemory, let onDisk { #expect(inMemory == onDisk, "\(key)") }
        }
        let restarted = try folder.stringBuilder().evictionPolicy(policy).maxRamCount(2).maxDiskCount(3)
            .build(sharingStore: false)
        for key in keys { check(restarted[key], key) }
        #expect(wrong.withLock { $0 }.isEmpty, "\(wrong.withLock { $0.prefix(10) })")
    }
}
