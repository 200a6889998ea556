/// The gets and sets that the levels of a composition saw, in the order they saw them.
///
/// A get through a composition visits its levels one after another, so once it returns, every line
/// it caused is here, in a fixed order.
final class LevelTrace: Sendable {
    private let lines = Locked<[String]>([])

    /// Adds a line.
    func record(_ line: String) {
        lines.withLock { $0.append(line) }
    }

    /// Prints every line recorded since the last call, and forgets them.
    func printAndClear() {
        let recorded = lines.withLock { lines in
            defer { lines = [] }
            return lines
        }
        for line in recorded { print("     ↳ " + line) }
    }

    /// Forgets the lines recorded since the last call without printing them.
    func clear() {
        lines.withLock { $0 = [] }
    }
}
