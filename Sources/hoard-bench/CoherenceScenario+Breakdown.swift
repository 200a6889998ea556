import Hoard
import HoardTestSupport

extension CoherenceBench {
    /// What one fleet run did, summed over its instances: the reads and how they were served, and
    /// what the caches did with their invalidations and fills.
    struct FleetCounts {
        var reads = 0
        var memoryHits = 0
        var sharedHits = 0
        var fetches = 0
        var invalidations = 0
        var tally = CoherenceTally()

        /// The counts of `instances` so far.
        init(_ instances: [Cache<String>]) {
            for cache in instances {
                let statistics = cache.statistics
                memoryHits += statistics.memoryHits
                sharedHits += statistics.sharedHits
                fetches += statistics.fetches
                invalidations += statistics.invalidations
                let tally = cache.coherenceTally
                self.tally.droppedHeld += tally.droppedHeld
                self.tally.droppedNotHeld += tally.droppedNotHeld
                self.tally.deferred += tally.deferred
                self.tally.echoChecks += tally.echoChecks
                self.tally.echoesConfirmed += tally.echoesConfirmed
                self.tally.fillsInstalled += tally.fillsInstalled
                self.tally.fillsRejectedChanged += tally.fillsRejectedChanged
                self.tally.fillsRejectedOwnWrite += tally.fillsRejectedOwnWrite
                self.tally.fillsBypassed += tally.fillsBypassed
                self.tally.fillsKeptDespiteSharedCount += tally.fillsKeptDespiteSharedCount
            }
        }

        init() {}

        /// The counts made between `before` and `self`.
        func since(_ before: FleetCounts) -> FleetCounts {
            var counts = FleetCounts()
            counts.reads = reads - before.reads
            counts.memoryHits = memoryHits - before.memoryHits
            counts.sharedHits = sharedHits - before.sharedHits
            counts.fetches = fetches - before.fetches
            counts.invalidations = invalidations - before.invalidations
            counts.tally.droppedHeld = tally.droppedHeld - before.tally.droppedHeld
            counts.tally.droppedNotHeld = tally.droppedNotHeld - before.tally.droppedNotHeld
            counts.tally.deferred = tally.deferred - before.tally.deferred
            counts.tally.echoChecks = tally.echoChecks - before.tally.echoChecks
            counts.tally.echoesConfirmed = tally.echoesConfirmed - before.tally.echoesConfirmed
            counts.tally.fillsInstalled = tally.fillsInstalled - before.tally.fillsInstalled
            counts.tally.fillsRejectedChanged = tally.fillsRejectedChanged - before.tally.fillsRejectedChanged
            counts.tally.fillsRejectedOwnWrite = tally.fillsRejectedOwnWrite - before.tally.fillsRejectedOwnWrite
            counts.tally.fillsBypassed = tally.fillsBypassed - before.tally.fillsBypassed
            counts.tally.fillsKeptDespiteSharedCount =
                tally.fillsKeptDespiteSharedCount - before.tally.fillsKeptDespiteSharedCount
            return counts
        }

        /// One line: reads, hits, misses, invalidations by kind, fills by fate.
        func line(_ label: String) -> String {
            let misses = reads - memoryHits
            return "\(label): \(reads) reads, \(memoryHits) memory hits, \(misses) misses "
                + "(\(sharedHits) shared hits, \(fetches) fetches); invalidations received \(invalidations): "
                + "\(tally.droppedHeld) dropped a held key, \(tally.droppedNotHeld) not held, "
                + "\(tally.echoChecks) echo checks (\(tally.echoesConfirmed) kept the copy), \(tally.deferred) deferred behind an own write; fills "
                + "\(tally.fillsInstalled) installed (\(tally.fillsKeptDespiteSharedCount) of them although a key "
                + "sharing their change count of 1 024 changed), \(tally.fillsRejectedChanged) rejected (the key's "
                + "change count moved), \(tally.fillsRejectedOwnWrite) rejected (own write under way), "
                + "\(tally.fillsBypassed) bypassed (gate closed)"
        }
    }

    /// The fleet run's operations replayed one step of each caller in turn, on one thread, with
    /// invalidations that arrive at once and fills that take no time: the memory hit rate when only
    /// first reads and true invalidations (a key the instance held, written by the other) cost hits.
    ///
    /// - Returns: The hit rates with invalidations and without (TTL-only), and the true invalidations.
    static func idealHitRates(
        instances: Int,
        callers: Int,
        each: Int
    ) -> (coherent: Double, ttlOnly: Double, trueInvalidations: Int) {
        let zipf = ZipfSampler(keys: 10_000, exponent: 0.99)
        var generators = (0..<instances).flatMap { number in
            (0..<callers).map { caller in SplitMix64(seed: UInt64(number * 100 + caller)) }
        }
        var coherent = [Set<Int>](repeating: [], count: instances)
        var ttlOnly = [Set<Int>](repeating: [], count: instances)
        var (reads, coherentHits, ttlHits, invalidated) = (0, 0, 0, 0)
        for _ in 0..<each {
            for index in generators.indices {
                let number = index / callers
                let key = zipf.next(using: &generators[index])
                if generators[index].next() % 10 == 0 {
                    coherent[number].insert(key)
                    ttlOnly[number].insert(key)
                    for other in 0..<instances where other != number && coherent[other].remove(key) != nil {
                        invalidated += 1
                    }
                } else {
                    reads += 1
                    if !coherent[number].insert(key).inserted { coherentHits += 1 }
                    if !ttlOnly[number].insert(key).inserted { ttlHits += 1 }
                }
            }
        }
        return (Double(coherentHits) / Double(reads), Double(ttlHits) / Double(reads), invalidated)
    }
}
