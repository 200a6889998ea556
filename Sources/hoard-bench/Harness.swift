import Foundation
import Hoard
import HoardTestSupport

// The measuring machinery shared by every scenario: run plans, one measuring helper, the report a
// scenario returns and how it is printed, seeded random inputs (SplitMix64, from HoardTestSupport)
// and temporary folders.

// MARK: - Plans and context

/// How often one measurement runs: warm-up runs (discarded), then measured runs.
struct RunPlan: Sendable {
    var warmups: Int
    var runs: Int

    /// The default: one warm-up, five measured runs.
    static let full = RunPlan(warmups: 1, runs: 5)
    /// `--quick`: one warm-up, two measured runs.
    static let quick = RunPlan(warmups: 1, runs: 2)
}

/// What every scenario is given.
struct BenchContext: Sendable {
    /// Whether `--quick` was passed: sizes divided by 10 and the quick run plan.
    let quick: Bool
    /// `--traces DIR`: the folder of real traces the hit-rate scenario replays instead of its own.
    var tracesDirectory: String? = nil
    /// `--sizes a,b,c`: the cache sizes for the real traces, instead of those in `anchors.json`.
    var traceSizes: [Int]? = nil

    var plan: RunPlan { quick ? .quick : .full }

    /// A scenario size: `full` normally, a tenth of it with `--quick`.
    func size(_ full: Int) -> Int { quick ? max(1, full / 10) : full }
}

// MARK: - Measuring

/// The measured runs of one row of a table.
struct Measurement: Sendable {
    /// The row's name.
    let label: String
    /// Operations done by one run; a run's rate is `operations / duration`.
    let operations: Int
    /// The measured runs, in the order they ran.
    let durations: [Duration]

    /// Operations per second of each run, slowest first.
    var sortedRates: [Double] { durations.map { Double(operations) / $0.seconds }.sorted() }

    /// The median rate (the mean of the middle two for an even number of runs).
    var median: Double {
        let rates = sortedRates
        let middle = rates.count / 2
        return rates.count % 2 == 1 ? rates[middle] : (rates[middle - 1] + rates[middle]) / 2
    }

    var minimum: Double { sortedRates.first ?? 0 }
    var maximum: Double { sortedRates.last ?? 0 }
}

extension Duration {
    /// The duration in seconds.
    var seconds: Double {
        let parts = components
        return Double(parts.seconds) + Double(parts.attoseconds) * 1e-18
    }
}

/// One row of a table: what it is called, how many operations one run does, and the run itself.
///
/// `run` does its own setup and teardown and returns only the time of the part that is measured
/// (use ``time(_:)``), so per-run setup such as a fresh folder or cache is never counted.
struct Contender {
    let label: String
    let operations: Int
    let run: () async throws -> Duration
}

/// Measures one row: the plan's warm-up runs, then its measured runs.
func measure(
    _ label: String,
    operations: Int,
    plan: RunPlan,
    _ run: @escaping () async throws -> Duration
) async throws -> Measurement {
    try await measureInterleaved([Contender(label: label, operations: operations, run: run)], plan: plan)[0]
}

/// Measures several rows round-robin: every row's warm-ups, then the first measured run of every
/// row, then the second, and so on; returns the rows in the order given.
///
/// On a shared or virtual machine the speed of memory and files drifts over seconds; interleaving
/// makes the drift reach every row alike, so the ratios between rows hold even when the absolute
/// numbers move. (File creation is the extreme case: on ext4 without a journal, creating a file gets
/// slower the more files were deleted in the last few minutes.)
func measureInterleaved(_ contenders: [Contender], plan: RunPlan) async throws -> [Measurement] {
    let started = ContinuousClock.now
    for contender in contenders {
        for _ in 0..<plan.warmups { _ = try await contender.run() }
    }
    var durations = Array(repeating: [Duration](), count: contenders.count)
    for _ in 0..<plan.runs {
        for (number, contender) in contenders.enumerated() { durations[number].append(try await contender.run()) }
    }
    let measurements = zip(contenders, durations).map { contender, durations in
        Measurement(label: contender.label, operations: contender.operations, durations: durations)
    }
    for measurement in measurements { progress("  \(measurement.label): \(formatRate(measurement.median))") }
    progress("  (\(String(format: "%.1f", started.duration(to: .now).seconds)) s)")
    return measurements
}

/// The time `body` takes on the continuous clock.
func time(_ body: () throws -> Void) rethrows -> Duration {
    let clock = ContinuousClock()
    let start = clock.now
    try body()
    return start.duration(to: clock.now)
}

/// Writes a progress line to standard error, so standard output stays a clean report.
func progress(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}

// MARK: - Reports

/// What a scenario hands back: its table, its comparisons and its summary lines.
struct ScenarioReport: Sendable {
    /// The scenario's CLI name.
    let name: String
    /// One line saying what was measured.
    let title: String
    /// The table rows, in order.
    var rows: [Measurement] = []
    /// The label of the row the table's ratio column divides by.
    var reference: String?
    /// Ratios printed under the table: (numerator row, denominator row).
    var comparisons: [(subject: String, baseline: String)] = []
    /// Rows that get no ratio in the table (a different kind of operation than the reference's).
    var unrated: Set<String> = []
    /// Lines for the final summary block: (text before the colon, row label).
    var summary: [(line: String, row: String)] = []
    /// Anything worth reading next to the numbers: failed checks, library log messages.
    var notes: [String] = []
    /// Every result the runs produced, folded together and printed so that nothing is optimised away.
    var checksum: UInt64 = 0
    /// Lines printed after the table, for results that are not rates (hit rates, say).
    var lines: [String] = []
    /// Lines added to the summary block as they are.
    var summaryText: [String] = []
    /// The performance targets this scenario's figures are checked against, for the final block.
    var targets: [TargetCheck] = []

    init(name: String, title: String) {
        self.name = name
        self.title = title
    }

    func row(_ label: String) -> Measurement? { rows.first { $0.label == label } }

    /// The report as printed after the scenario ran.
    func rendered() -> String {
        let referenceRow = reference.flatMap(row)
        let ratioHeader = referenceRow.map { "vs \($0.label)" } ?? ""
        var table: [[String]] = rows.isEmpty ? [] : [["name", "median", "min – max", ratioHeader]]
        for row in rows {
            let unit = RateUnit(for: row.median)
            let ratio =
                unrated.contains(row.label) ? "" : referenceRow.map { formatRatio(row.median / $0.median) } ?? ""
            table.append([
                row.label,
                unit.format(row.median),
                "\(unit.format(row.minimum, withUnit: false)) – \(unit.format(row.maximum))",
                ratio,
            ])
        }
        let widths = (0..<4).map { column in table.map { $0[column].count }.max() ?? 0 }
        var lines = ["== \(name): \(title) =="]
        for (number, cells) in table.enumerated() {
            // Names and ratios left-aligned, rates right-aligned.
            let padded = cells.enumerated().map { column, cell in
                column == 1 || column == 2
                    ? pad(cell, widths[column]) : cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
            }
            lines.append(trimmed("  " + padded.joined(separator: "   ")))
            if number == 0 {
                lines.append(trimmed("  " + widths.map { String(repeating: "-", count: $0) }.joined(separator: "   ")))
            }
        }
        for (subject, baseline) in comparisons {
            guard let top = row(subject), let bottom = row(baseline) else { continue }
            lines.append("  \(subject) / \(baseline): \(formatRatio(top.median / bottom.median))")
        }
        for line in self.lines { lines.append("  " + line) }
        for note in notes { lines.append("  note: \(note)") }
        lines.append("  checksum: \(checksum)")
        return lines.joined(separator: "\n")
    }

    /// The report's lines for the summary block.
    func summaryLines() -> [String] {
        summary.compactMap { line, label in row(label).map { "\(line): \(formatRate($0.median))" } } + summaryText
    }
}

/// One performance target and whether the measured figure meets it.
struct TargetCheck: Sendable {
    /// The target, as in `memory get-hit (lru) ≥ 4 M/s`.
    let target: String
    /// The measured figure, as in `3.38 M/s`.
    let measured: String
    let holds: Bool
    /// Whether this run can tell: `false` where the host itself fell short of what the target needs
    /// (a second core that two threads sharing nothing cannot use, a thread hand-over slower than
    /// the target), so that neither `holds` nor a miss would say anything about Hoard.
    var isJudged = true

    /// A rate that must reach `minimum`.
    static func rate(_ target: String, _ row: Measurement?, atLeast minimum: Double) -> TargetCheck {
        guard let row else { return TargetCheck(target: target, measured: "not measured", holds: false) }
        return TargetCheck(target: target, measured: formatRate(row.median), holds: row.median >= minimum)
    }

    /// The ratio of two rows' medians, which must reach `minimum`.
    static func ratio(
        _ target: String,
        _ top: Measurement?,
        _ bottom: Measurement?,
        atLeast minimum: Double
    )
        -> TargetCheck
    {
        guard let top, let bottom else { return TargetCheck(target: target, measured: "not measured", holds: false) }
        let ratio = top.median / bottom.median
        return TargetCheck(
            target: target,
            measured: "\(formatRatio(ratio)) (\(formatRate(top.median)) / \(formatRate(bottom.median)))",
            holds: ratio >= minimum
        )
    }

    /// The line printed in the final block.
    var rendered: String { "\(isJudged ? (holds ? "holds " : "MISSED") : "n/a   ")  \(target): \(measured)" }
}

/// `line` without trailing spaces.
private func trimmed(_ line: String) -> String {
    String(line.reversed().drop { $0 == " " }.reversed())
}

/// Formats `number` with thousands separators, as in `1,000,000`.
func grouped(_ number: Int) -> String {
    let digits = Array(String(number.magnitude))
    var text = ""
    for (position, digit) in digits.enumerated() {
        if position > 0 && (digits.count - position) % 3 == 0 { text.append(",") }
        text.append(digit)
    }
    return number < 0 ? "-" + text : text
}

/// Right-aligns `text` in `width` characters.
func pad(_ text: String, _ width: Int) -> String {
    String(repeating: " ", count: max(0, width - text.count)) + text
}

/// The unit a rate is printed in: M/s, k/s or /s.
struct RateUnit {
    let divisor: Double
    let suffix: String

    init(for rate: Double) {
        if rate >= 1e6 {
            (divisor, suffix) = (1e6, "M/s")
        } else if rate >= 1e3 {
            (divisor, suffix) = (1e3, "k/s")
        } else {
            (divisor, suffix) = (1, "/s")
        }
    }

    /// Three significant digits, so that numbers line up in a table.
    func format(_ rate: Double, withUnit: Bool = true) -> String {
        let value = rate / divisor
        let digits = value >= 100 ? 0 : value >= 10 ? 1 : 2
        let number = String(format: "%.\(digits)f", value)
        return withUnit ? "\(number) \(suffix)" : number
    }
}

/// Formats a rate with its unit, as in `12.3 M/s`.
func formatRate(_ rate: Double) -> String { RateUnit(for: rate).format(rate) }

/// Formats a ratio, as in `0.45×`.
func formatRatio(_ ratio: Double) -> String {
    String(format: ratio >= 10 ? "%.1f×" : "%.2f×", ratio)
}

// MARK: - Random numbers

/// `count` indices drawn uniformly from `0 ..< bound`.
func uniformIndices(count: Int, below bound: Int, seed: UInt64) -> [Int] {
    var generator = SplitMix64(seed: seed)
    return (0..<count).map { _ in Int.random(in: 0..<bound, using: &generator) }
}

/// The numbers `0 ..< count` in a random order.
func shuffledIndices(count: Int, seed: UInt64) -> [Int] {
    var generator = SplitMix64(seed: seed)
    return Array(0..<count).shuffled(using: &generator)
}

/// `count` bytes of seeded noise.
func noise(count: Int, seed: UInt64) -> Data {
    var generator = SplitMix64(seed: seed)
    return Data((0..<count).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
}

/// A memory-only `Cache<Int>` (disk off) that holds at most `capacity` entries, as every memory
/// scenario measures it; `policy` defaults to the builder's.
func memoryOnlyCache(capacity: Int, policy: EvictionPolicy? = nil) throws -> Cache<Int> {
    let builder = CacheBuilder<Int>().maxDiskCount(0).maxRamCount(capacity)
    return try (policy.map { builder.evictionPolicy($0) } ?? builder).build()
}

/// Makes the keys `key-0`, `key-1` and so on.
func makeKeys(_ count: Int) -> [String] {
    (0..<count).map { "key-\($0)" }
}

// MARK: - Temporary folders

/// Fresh folders for the runs of one scenario, under one folder in the system's temporary folder.
///
/// Every run takes a fresh folder, and all of them are removed together when the scenario ends,
/// not after each run: on ext4 without a journal, creating a file gets
/// slower the more files were deleted in the last few minutes (the kernel skips recently freed
/// inodes), so removing run n's 10 000 files would slow run n + 1 down. The root follows `TMPDIR`.
final class ScratchFolders {
    let root: URL
    private var made = 0

    fileprivate init() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent(
            "hoard-bench-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString)",
            isDirectory: true
        )
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    }

    /// A new, empty folder.
    func fresh() throws -> URL {
        made += 1
        let url = root.appendingPathComponent("\(made)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    fileprivate func removeAll() {
        try? FileManager.default.removeItem(at: root)
    }
}

/// Runs `body` with a scratch area and removes everything it holds afterwards, whether `body`
/// throws or not.
func withScratchFolders<Result>(_ body: (ScratchFolders) async throws -> Result) async throws -> Result {
    let scratch = try ScratchFolders()
    do {
        let result = try await body(scratch)
        scratch.removeAll()
        return result
    } catch {
        scratch.removeAll()
        throw error
    }
}
