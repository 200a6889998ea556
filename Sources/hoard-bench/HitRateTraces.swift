import Foundation
import HoardTestSupport

/// The synthetic request traces of the hit-rate scenario, and Belady's optimal hit rate on them.
///
/// A trace is a list of key numbers: `0..<keyCount` are drawn from a Zipf distribution, numbers from
/// `keyCount` on are one-shot keys (each requested once).
struct HitRateTrace {
    /// The trace's name in the table.
    let name: String
    /// Whether the static-trace target applies (no scans, no shift).
    let isStatic: Bool
    /// The key numbers, in request order.
    let requests: [Int]
    /// One more than the largest key number.
    let keySpace: Int

    /// A Zipf trace, static or with a moving hot set or scans.
    ///
    /// Zipf(`exponent`) over `keys` keys; with `shiftEvery`, the hot set moves that often (every rank
    /// moves by a random offset); with `scan`, a burst of `scan.length` one-shot keys follows every
    /// `scan.every` Zipf requests. `requests` counts every request, the scans' included.
    static func zipf(
        name: String,
        exponent: Double,
        keys: Int,
        requests: Int,
        shiftEvery: Int? = nil,
        scan: (every: Int, length: Int)? = nil,
        seed: UInt64
    ) -> HitRateTrace {
        let zipf = ZipfSampler(keys: keys, exponent: exponent)
        var generator = SplitMix64(seed: seed)
        var offset = 0
        var nextOneShot = keys
        var zipfRequests = 0
        var trace: [Int] = []
        trace.reserveCapacity(requests)
        while trace.count < requests {
            if let scan, zipfRequests > 0, zipfRequests % scan.every == 0, trace.last.map({ $0 < keys }) ?? true {
                for _ in 0..<min(scan.length, requests - trace.count) {
                    trace.append(nextOneShot)
                    nextOneShot += 1
                }
                if trace.count == requests { break }
            }
            if let shiftEvery, zipfRequests % shiftEvery == 0 { offset = Int(generator.next() % UInt64(keys)) }
            trace.append((zipf.next(using: &generator) + offset) % keys)
            zipfRequests += 1
        }
        let isStatic = shiftEvery == nil && scan == nil
        return HitRateTrace(name: name, isStatic: isStatic, requests: trace, keySpace: nextOneShot)
    }

    /// The hit rate (%) of Belady's optimal policy for a cache of `capacity` entries that stores every
    /// miss: when full, it removes the entry whose next request is furthest away.
    ///
    /// - Complexity: O(n log n): next uses computed backwards, a max-heap with stale entries skipped.
    func optimalHitRate(capacity: Int) -> Double {
        let never = Int.max
        var nextUse = [Int](repeating: never, count: requests.count)
        var seenAt = [Int](repeating: never, count: keySpace)
        for position in requests.indices.reversed() {
            nextUse[position] = seenAt[requests[position]]
            seenAt[requests[position]] = position
        }
        // For each stored key, its next use; the heap may hold older (stale) next uses too.
        var storedNextUse = [Int](repeating: -1, count: keySpace)
        var heap = MaxHeap()
        var stored = 0
        var hits = 0
        for (position, key) in requests.enumerated() {
            if storedNextUse[key] >= 0 {
                hits += 1
            } else {
                if stored == capacity {
                    while let top = heap.popMax() {
                        if storedNextUse[top.key] == top.nextUse {
                            storedNextUse[top.key] = -1
                            stored -= 1
                            break
                        }
                    }
                }
                stored += 1
            }
            storedNextUse[key] = nextUse[position]
            heap.insert((nextUse[position], key))
        }
        return Double(hits) * 100 / Double(requests.count)
    }
}

extension HitRateTrace {
    /// The hit rate (%) of a perfect LFU: exact counts of every key ever requested (not only the
    /// stored ones), never aged, and a cache that holds the `capacity` keys with the highest counts.
    ///
    /// A miss is stored when its count, this request included, is at least the lowest stored count
    /// (the least recently used of the lowest goes); otherwise it is not stored. On a trace whose
    /// requests are drawn independently, counts are all an online policy can learn popularity from,
    /// so this is about as far as a policy that learns from counts can go; it keeps a count per key
    /// ever seen, which no cache can afford. A reference for the static rows, not a contender.
    ///
    /// - Complexity: O(n log n): a min-heap of (count, last request) with stale entries skipped.
    func perfectLFUHitRate(capacity: Int) -> Double {
        var counts = [Int](repeating: 0, count: keySpace)
        // For each stored key, the priority it was last pushed with; -1 when not stored.
        var storedPriority = [Int](repeating: -1, count: keySpace)
        var heap = MaxHeap()  // holds negated priorities: its maximum is the lowest priority
        let timeBits = max(1, (requests.count + 1).bitWidth - (requests.count + 1).leadingZeroBitCount)
        func priority(_ key: Int, at position: Int) -> Int { counts[key] << timeBits | position }
        var stored = 0
        var hits = 0
        for (position, key) in requests.enumerated() {
            counts[key] += 1
            if storedPriority[key] >= 0 {
                hits += 1
            } else if stored == capacity {
                // The lowest stored priority: skip heap entries a later request made stale.
                guard var lowest = heap.popMax() else { continue }
                while storedPriority[lowest.key] != -lowest.nextUse, let next = heap.popMax() { lowest = next }
                if counts[key] < (-lowest.nextUse) >> timeBits {
                    heap.insert(lowest)  // the missed key is rarer than every stored one: not stored
                    continue
                }
                storedPriority[lowest.key] = -1
            } else {
                stored += 1
            }
            storedPriority[key] = priority(key, at: position)
            heap.insert((-storedPriority[key], key))
        }
        return Double(hits) * 100 / Double(requests.count)
    }
}

/// A binary max-heap of (next use, key), ordered by next use.
private struct MaxHeap {
    private var items: [(nextUse: Int, key: Int)] = []

    mutating func insert(_ item: (nextUse: Int, key: Int)) {
        items.append(item)
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[parent].nextUse < items[child].nextUse else { break }
            items.swapAt(parent, child)
            child = parent
        }
    }

    mutating func popMax() -> (nextUse: Int, key: Int)? {
        guard let top = items.first else { return nil }
        let last = items.removeLast()
        if !items.isEmpty {
            items[0] = last
            var parent = 0
            while true {
                let left = 2 * parent + 1
                let right = left + 1
                var largest = parent
                if left < items.count && items[left].nextUse > items[largest].nextUse { largest = left }
                if right < items.count && items[right].nextUse > items[largest].nextUse { largest = right }
                if largest == parent { break }
                items.swapAt(parent, largest)
                parent = largest
            }
        }
        return top
    }
}
