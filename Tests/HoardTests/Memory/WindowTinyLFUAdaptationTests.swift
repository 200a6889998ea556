import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// The adaptive window on small traces made here: a loop, a scan, and phase changes between
/// frequency and recency, each next to plain LRU on the same requests.
@Suite struct WindowTinyLFUAdaptationTests {
    /// Replays `trace` the way a cache does (get, and set on a miss after making room); returns
    /// whether each request hit.
    private static func replay(_ trace: [Int], on index: inout EvictionIndex<StableKey, Int>, capacity: Int) -> [Bool] {
        trace.map { key in
            if index.access(key) != nil { return true }
            if index.count >= capacity { _ = index.popVictim() }
            index.upsert(key, forKey: key)
            return false
        }
    }

    /// The percentage of `true` in `hits[range]`.
    private static func hitRate(_ hits: [Bool], _ range: Range<Int>) -> Double {
        Double(hits[range].filter { $0 }.count) * 100 / Double(range.count)
    }

    /// Requests drawn from Zipf(`exponent`) over `keys` keys, numbered from `base`.
    private static func zipf(keys: Int, exponent: Double, count: Int, base: Int, seed: UInt64) -> [Int] {
        let sampler = ZipfSampler(keys: keys, exponent: exponent)
        var generator = SplitMix64(seed: seed)
        return (0..<count).map { _ in base + sampler.next(using: &generator) }
    }

    /// A recency workload, where LRU is close to the best.
    ///
    /// Each request is a new key (one in `newKeyEvery`) or a recent one, `k` keys back in the order
    /// new keys arrived with `k` exponential of mean `meanDistance`. Keys are numbered from `base`.
    private static func sliding(count: Int, meanDistance: Double, newKeyEvery: UInt64, base: Int, seed: UInt64) -> [Int]
    {
        var generator = SplitMix64(seed: seed)
        var next = 0
        return (0..<count).map { _ in
            let uniform = Double(generator.next() >> 11) / Double(UInt64(1) << 53)
            let back = Int(-log(1 - uniform) * meanDistance)
            var key = next - 1 - back
            if key < 0 || generator.next() % newKeyEvery == 0 {
                key = next
                next += 1
            }
            return base + key
        }
    }

    @Test func aLoopSlightlyLargerThanTheCacheStaysMostlyCached() {
        // 220 keys in a loop through a cache of 200: LRU always evicts the key needed next.
        let capacity = 200
        let trace = (0..<44_000).map { $0 % 220 }
        var adaptive = EvictionIndex<StableKey, Int>(policy: .wTinyLFU, capacity: capacity)
        var lru = EvictionIndex<StableKey, Int>(policy: .lru, capacity: capacity)
        let adaptiveHits = Self.replay(trace, on: &adaptive, capacity: capacity)
        let lruHits = Self.replay(trace, on: &lru, capacity: capacity)
        let late = 22_000..<44_000
        #expect(Self.hitRate(lruHits, late) == 0)
        // The best possible is about 200 of 220 (90.9 %).
        let rate = Self.hitRate(adaptiveHits, late)
        #expect(rate >= 85, "loop hit rate \(rate) %")
        adaptive.checkInvariants()
    }

    @Test func aScanDoesNotFlushAHotZipfSet() {
        let capacity = 300
        var adaptive = EvictionIndex<StableKey, Int>(policy: .wTinyLFU, capacity: capacity)
        var lru = EvictionIndex<StableKey, Int>(policy: .lru, capacity: capacity)
        let warm = Self.zipf(keys: 3_000, exponent: 1.0, count: 60_000, base: 0, seed: 31)
        _ = Self.replay(warm, on: &adaptive, capacity: capacity)
        _ = Self.replay(warm, on: &lru, capacity: capacity)
        let hot = Array(0..<100)
        let hotBefore = hot.filter { adaptive.contains($0) }.count
        // 3 000 one-shot keys, ten times the cache.
        let scan = Array(1_000_000..<1_003_000)
        _ = Self.replay(scan, on: &adaptive, capacity: capacity)
        _ = Self.replay(scan, on: &lru, capacity: capacity)
        #expect(hot.filter { lru.contains($0) }.isEmpty, "LRU loses the hot set to the scan")
        let hotAfter = hot.filter { adaptive.contains($0) }.count
        #expect(hotBefore >= 90)
        #expect(hotAfter >= hotBefore - 5, "hot keys cached: \(hotBefore) before the scan, \(hotAfter) after")
        adaptive.checkInvariants()
    }

    @Test func afterAPhaseChangeFromFrequencyToRecencyTheWindowGrowsAndCatchesUpWithLRU() {
        let capacity = 500
        let frequency = Self.zipf(keys: 10_000, exponent: 0.9, count: 60_000, base: 0, seed: 41)
        let recency = Self.sliding(count: 60_000, meanDistance: 400, newKeyEvery: 4, base: 1_000_000, seed: 42)
        var adaptive = EvictionIndex<StableKey, Int>(policy: .wTinyLFU, capacity: capacity)
        var lru = EvictionIndex<StableKey, Int>(policy: .lru, capacity: capacity)
        let first = Self.replay(frequency, on: &adaptive, capacity: capacity)
        let frequencyWindow = adaptive.admission.windowTarget
        let all = first + Self.replay(recency, on: &adaptive, capacity: capacity)
        let lruHits = Self.replay(frequency + recency, on: &lru, capacity: capacity)
        #expect(Self.hitRate(first, 0..<60_000) >= Self.hitRate(lruHits, 0..<60_000) + 5, "frequency pays first")
        #expect(frequencyWindow <= capacity / 20)
        #expect(adaptive.admission.windowTarget >= capacity / 2)
        // 15 000 requests after the change (30 times the cache), within 2 points of LRU from there on.
        let recovered = 75_000..<120_000
        let adaptiveRate = Self.hitRate(all, recovered)
        let lruRate = Self.hitRate(lruHits, recovered)
        #expect(adaptiveRate >= lruRate - 2, "adaptive \(adaptiveRate) %, LRU \(lruRate) %")
        adaptive.checkInvariants()
    }

    @Test func afterAPhaseChangeFromRecencyToFrequencyTheWindowShrinksAndBeatsLRU() {
        let capacity = 500
        let recency = Self.sliding(count: 60_000, meanDistance: 400, newKeyEvery: 4, base: 1_000_000, seed: 52)
        let frequency = Self.zipf(keys: 10_000, exponent: 0.9, count: 120_000, base: 0, seed: 51)
        var adaptive = EvictionIndex<StableKey, Int>(policy: .wTinyLFU, capacity: capacity)
        var lru = EvictionIndex<StableKey, Int>(policy: .lru, capacity: capacity)
        let first = Self.replay(recency, on: &adaptive, capacity: capacity)
        let recencyWindow = adaptive.admission.windowTarget
        let all = first + Self.replay(frequency, on: &adaptive, capacity: capacity)
        let lruHits = Self.replay(recency + frequency, on: &lru, capacity: capacity)
        let late = 120_000..<180_000
        let adaptiveRate = Self.hitRate(all, late)
        let lruRate = Self.hitRate(lruHits, late)
        #expect(recencyWindow >= capacity / 2, "the recency phase grows the window")
        #expect(adaptive.admission.windowTarget <= capacity / 10)
        #expect(adaptiveRate >= lruRate + 5, "adaptive \(adaptiveRate) %, LRU \(lruRate) %")
        adaptive.checkInvariants()
    }
}
