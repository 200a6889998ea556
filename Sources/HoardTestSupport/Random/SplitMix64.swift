/// SplitMix64 (Steele, Lea and Flood): a tiny, fast, seedable random number generator.
///
/// Equal seeds give equal sequences, on every platform and in every run: the benchmark reads the
/// same keys in the same order each time, and a failing test or crash trial can be replayed from
/// the seed it prints. The benchmark's hit-rate figures depend on these exact streams, so `next()`
/// must not change.
///
/// ```swift
/// var generator = SplitMix64(seed: 42)
/// let key = Int.random(in: 0..<1_000, using: &generator)
/// ```
package struct SplitMix64: RandomNumberGenerator, Sendable {
    /// The generator state: advanced by a constant on every draw, then mixed into the output.
    @usableFromInline var state: UInt64

    /// Creates a generator; equal seeds give equal sequences.
    @inlinable
    package init(seed: UInt64) { state = seed }

    /// Returns the next 64 pseudo-random bits.
    @inlinable
    package mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var mixed = state
        mixed = (mixed ^ (mixed >> 30)) &* 0xbf58_476d_1ce4_e5b9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94d0_49bb_1331_11eb
        return mixed ^ (mixed >> 31)
    }
}
