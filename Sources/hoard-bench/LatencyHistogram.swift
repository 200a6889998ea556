/// Latencies in nanoseconds, counted in buckets 1/64 of a power of two wide, so that a reader making
/// millions of calls keeps a few kilobytes instead of every sample.
///
/// A percentile is the lower bound of its bucket (within 1.6 %); the maximum is exact.
struct LatencyHistogram: Sendable {
    private var buckets = [Int](repeating: 0, count: 64 * 59)
    private(set) var count = 0
    private(set) var maximum: UInt64 = 0

    mutating func record(_ nanoseconds: UInt64) {
        buckets[Self.bucket(nanoseconds)] += 1
        count += 1
        maximum = max(maximum, nanoseconds)
    }

    mutating func record(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        record(UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000))
    }

    /// The latency below which `fraction` of the samples lie (0 with none).
    func percentile(_ fraction: Double) -> UInt64 {
        let rank = Int(Double(count) * fraction)
        var seen = 0
        for (index, number) in buckets.enumerated() where number > 0 {
            seen += number
            if seen > rank { return Self.lowerBound(index) }
        }
        return maximum
    }

    /// Values under 128 have a bucket each; above, the top 7 bits pick one.
    private static func bucket(_ value: UInt64) -> Int {
        guard value >= 128 else { return Int(value) }
        let shift = 64 - value.leadingZeroBitCount - 7
        return shift * 64 + Int(value >> UInt64(shift))
    }

    private static func lowerBound(_ index: Int) -> UInt64 {
        guard index >= 128 else { return UInt64(index) }
        let shift = index / 64 - 1
        return UInt64(index - shift * 64) << UInt64(shift)
    }
}

/// A latency for a report line: `850 ns`, `12.3 µs`, `4.1 ms`, `1.02 s`.
func formatLatency(_ nanoseconds: UInt64) -> String {
    let value = Double(nanoseconds)
    switch value {
    case ..<1_000: return "\(nanoseconds) ns"
    case ..<1_000_000: return String(format: "%.1f µs", value / 1e3)
    case ..<1_000_000_000: return String(format: "%.1f ms", value / 1e6)
    default: return String(format: "%.2f s", value / 1e9)
    }
}
