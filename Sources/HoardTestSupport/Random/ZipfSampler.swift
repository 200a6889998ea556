import Foundation

/// Draws ranks from Zipf(`exponent`) over `0 ..< keys`: rank `r` has weight `1 / (r + 1)^exponent`,
/// so rank 0 is the most popular.
///
/// A draw inverts the cumulative weights with a binary search. Each draw takes exactly one `next()`
/// from the generator (its top 53 bits, as a fraction of the total weight), so a trace that
/// interleaves other draws from the same generator stays reproducible.
///
/// ```swift
/// let zipf = ZipfSampler(keys: 100_000, exponent: 0.99)
/// var generator = SplitMix64(seed: 7)
/// let trace = (0..<1_000_000).map { _ in zipf.next(using: &generator) }
/// ```
package struct ZipfSampler: Sendable {
    /// The number of ranks: every draw is in `0 ..< keys`.
    package let keys: Int
    /// The running sums of the weights: `cumulative[r]` is the weight of ranks `0 ... r`.
    @usableFromInline let cumulative: [Double]

    /// Computes the cumulative weights of `keys` ranks.
    ///
    /// - Parameters:
    ///   - keys: How many ranks there are; at least 1.
    ///   - exponent: The skew: 0 is uniform, larger favours the first ranks more.
    /// - Complexity: O(`keys`).
    package init(keys: Int, exponent: Double) {
        precondition(keys > 0, "a Zipf distribution needs at least one key")
        var cumulative = [Double](repeating: 0, count: keys)
        var total = 0.0
        for rank in 0..<keys {
            total += 1 / pow(Double(rank + 1), exponent)
            cumulative[rank] = total
        }
        self.keys = keys
        self.cumulative = cumulative
    }

    /// Draws one rank.
    ///
    /// - Parameter generator: The source of randomness; advanced by one `next()`.
    /// - Returns: A rank in `0 ..< keys`.
    /// - Complexity: O(log `keys`).
    @inlinable
    package func next(using generator: inout some RandomNumberGenerator) -> Int {
        // 53 random bits as a fraction in [0, 1), scaled to the total weight.
        let target = Double(generator.next() >> 11) / Double(UInt64(1) << 53) * cumulative[keys - 1]
        var low = 0
        var high = keys - 1
        while low < high {
            let middle = (low + high) / 2
            if cumulative[middle] < target { low = middle + 1 } else { high = middle }
        }
        return low
    }
}
