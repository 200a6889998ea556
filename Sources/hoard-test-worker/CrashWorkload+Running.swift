import Foundation
import Hoard
import HoardTestSupport

extension CrashWorkload {
    /// Runs the workload that `arguments` (a `Setup`'s) describe, for a test that kills the process.
    ///
    /// Each operation is reported as a `Record` *before* it starts, so the test knows every operation
    /// that may have reached the disk; a read that disagrees with what this process set is reported
    /// as a mismatch.
    static func run(arguments: [String]) async throws {
        guard let setup = Setup(arguments: arguments) else { Worker.usage() }
        var latest = LatestValues(mayEvict: setup.mayEvict)
        let operations = RandomOperations(setsBelow: 55, removesBelow: 70, lengthLimit: 3_000)
        try await operations.run(setup, check: &latest) { emit($0.line) }
    }
}

/// The values this process set last: a read must find them.
private struct LatestValues: ReadCheck {
    /// With fewer disk slots than keys, the disk evicts and a read may miss a value it was given.
    let mayEvict: Bool
    private var values: [String: String] = [:]

    init(mayEvict: Bool) { self.mayEvict = mayEvict }

    mutating func didSet(_ value: String?, forKey key: String) { values[key] = value }

    mutating func didRemoveAll() { values.removeAll() }

    func mismatch(reading read: String?, forKey key: String) -> String? {
        guard read != values[key] && !(read == nil && mayEvict) else { return nil }
        let expected = values[key]?.prefix(40) ?? "nil"
        return "\(read?.prefix(40) ?? "nil") instead of \(expected)"
    }
}
