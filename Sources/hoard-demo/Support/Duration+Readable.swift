import Foundation

extension Duration {
    /// `512 µs` below a millisecond, `201.3 ms` above.
    var readable: String {
        let (seconds, attoseconds) = components
        let microseconds = Double(seconds) * 1_000_000 + Double(attoseconds) / 1_000_000_000_000
        if microseconds < 1_000 { return String(format: "%.0f µs", microseconds) }
        return String(format: "%.1f ms", microseconds / 1_000)
    }
}
