import Foundation

/// The tests' random number generator under the name the trust harnesses use.
typealias SeededRandom = SplitMix64

/// A small deterministic random number generator (SplitMix64), so that a failing run can be replayed
/// from the seed it prints.
struct SplitMix64: RandomNumberGenerator, Sendable {
    /// The generator state.
    private var state: UInt64

    /// Creates a generator; equal seeds give equal sequences.
    init(seed: UInt64) { state = seed }

    /// Returns the next 64 pseudo-random bits.
    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var mixed = state
        mixed = (mixed ^ (mixed >> 30)) &* 0xbf58_476d_1ce4_e5b9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94d0_49bb_1331_11eb
        return mixed ^ (mixed >> 31)
    }
}

/// How hard the stress tests push.
///
/// `HOARD_STRESS_ROUNDS` (a positive integer, default 1) multiplies their operation and history
/// counts, e.g. `HOARD_STRESS_ROUNDS=20 swift test --filter Trust`.
enum StressScale {
    /// The multiplier read from the environment.
    static let rounds: Int = {
        guard let text = ProcessInfo.processInfo.environment["HOARD_STRESS_ROUNDS"], let rounds = Int(text), rounds > 0
        else { return 1 }
        return rounds
    }()
}
