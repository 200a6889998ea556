import Foundation

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
