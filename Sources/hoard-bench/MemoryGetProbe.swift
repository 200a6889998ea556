import Foundation
import Hoard

/// A single row of `memory-get` in a process of its own, for `valgrind --tool=cachegrind`
/// (`hoard-bench --memory-get-probe w-tinylfu`).
///
/// Fills the container with the scenario's keys, makes one untimed pass of the scenario's gets, then
/// a second through ``measuredGets(_:_:_:)``, which is never inlined, so that
/// `--toggle-collect='*measuredGets*'` counts that pass alone: its instructions and misses divided
/// by the number of gets are a hit's.
enum MemoryGetProbe {
    /// The hidden first argument that runs the probe.
    static let childArgument = "--memory-get-probe"

    static func runChild(_ arguments: [String]) -> Int32 {
        let keyCount = 100_000
        let getCount = arguments.count > 1 ? Int(arguments[1]) ?? 1_000_000 : 1_000_000
        let keys = makeKeys(keyCount)
        let indices = uniformIndices(count: getCount, below: keyCount, seed: 0x4D45_4D47)
        let read: (String) -> Int?
        switch arguments.first {
        case "lru", "lfu", "w-tinylfu":
            let policy: EvictionPolicy =
                switch arguments[0] {
                case "lru": .lru
                case "lfu": .lfu
                default: .wTinyLFU
                }
            guard let cache = try? memoryOnlyCache(capacity: keyCount, policy: policy) else { return 1 }
            for (value, key) in keys.enumerated() { cache[key] = value }
            read = { cache[$0] }
        case "mutex":
            guard #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) else { return 1 }
            var own: [String: Int] = [:]
            own.reserveCapacity(keyCount)
            for (value, key) in keys.enumerated() { own[key] = value }
            let mutex = MutexDictionary(own)
            read = { mutex.value(forKey: $0) }
        default:
            progress("usage: hoard-bench \(childArgument) <lru|lfu|w-tinylfu|mutex> [gets]")
            return 2
        }
        let warm = warmUpGets(read, keys, indices)
        let sum = measuredGets(read, keys, indices)
        print("sum \(sum) (warm-up \(warm)), \(getCount) gets")
        return 0
    }

    /// The untimed pass, outside what cachegrind collects: it folds the values with another
    /// operation than ``measuredGets(_:_:_:)``, so that the compiler does not merge the two.
    @inline(never)
    static func warmUpGets(_ read: (String) -> Int?, _ keys: [String], _ indices: [Int]) -> UInt64 {
        var folded: UInt64 = 0
        for index in indices { folded ^= UInt64(truncatingIfNeeded: read(keys[index]) ?? -1) }
        return folded
    }

    /// The pass cachegrind collects.
    @inline(never)
    static func measuredGets(_ read: (String) -> Int?, _ keys: [String], _ indices: [Int]) -> UInt64 {
        var sum: UInt64 = 0
        for index in indices { sum &+= UInt64(truncatingIfNeeded: read(keys[index]) ?? -1) }
        return sum
    }
}
