import Foundation
import Hoard

/// Hit rates on real traces (`hoard-bench hitrate --traces DIR`), next to what classic policies
/// score on them.
///
/// Every `*.txt.gz` (read through `gzip -dc`) or `*.txt` file in the folder is a trace: one request
/// per line, a dense integer id. The folder's `anchors.json` lists, per trace, the cache sizes to
/// replay and the hit rates (%) of classic policies at each: exact LRU and Belady's OPT, and ARC,
/// LIRS, S3-FIFO and a static W-TinyLFU, among others. `--sizes a,b,c` replaces the sizes.
///
/// Each trace is replayed through the real memory level (a memory-only `Cache<Int>` with
/// `maxRamCount` = the size: get, and set on a miss) for the builder's default policy and every
/// named policy. Each row shows Hoard's rates beside the anchors, and the default's gap to the best
/// of LRU, ARC, LIRS, S3-FIFO and W-TinyLFU on that row; the end of the table sums the gaps up for
/// every policy. Two checks of the harness: Hoard's `.lru` must equal the exact LRU column (within
/// 0.05 points) where the level is not sharded, and no policy may beat OPT.
enum RealTraceHitRate {
    /// The anchor columns shown, in order; the first five make "the best classic".
    static let classicColumns = ["LRU", "ARC", "LIRS", "S3FIFO", "WTinyLFU"]

    /// One row of `anchors.json`: a size and the policies' hit rates there.
    struct AnchorRow {
        let size: Int
        let rates: [String: Double]

        /// The best of the classic columns that the row has.
        var bestClassic: Double? { RealTraceHitRate.classicColumns.compactMap { rates[$0] }.max() }
    }

    /// One trace and its anchors.
    struct Trace {
        let name: String
        let requests: [Int]
        let distinct: Int
        let anchors: [AnchorRow]
    }

    static func run(_ context: BenchContext, directory: String, sizes: [Int]?) async throws -> ScenarioReport {
        var report = ScenarioReport(name: "hitrate", title: "hit rate (%) on the real traces in \(directory)")
        let traces = try loadTraces(in: directory, sizes: sizes)
        guard !traces.isEmpty else {
            report.notes.append("no *.txt.gz or *.txt trace in \(directory)")
            report.targets.append(TargetCheck(target: "real traces found", measured: "none", holds: false))
            return report
        }
        let policies: [(name: String, policy: EvictionPolicy?)] =
            [("default", nil)] + EvictionPolicy.allCases.map { ($0.description, $0) }
        report.lines.append(
            "trace        size" + policies.map { pad($0.name, 10) }.joined()
                + (classicColumns + ["OPT"]).map { pad($0.lowercased(), 9) }.joined() + "     best    gap"
        )
        var gaps = [String: [(row: String, gap: Double)]]()
        var checksum: UInt64 = 0
        var harnessProblems: [String] = []
        var defaultRates: [String: Double] = [:]
        let shardingThreshold = 16_384
        for trace in traces {
            let keys = makeKeys(trace.distinct)
            for anchor in trace.anchors {
                var rates: [String: Double] = [:]
                for (name, policy) in policies {
                    rates[name] = try HitRate.hitRate(policy, capacity: anchor.size, trace: trace.requests, keys: keys)
                    checksum &+= UInt64((rates[name] ?? 0) * 1_000)
                }
                let label = "\(trace.name)@\(anchor.size)"
                defaultRates[label] = rates["default"]
                let best = anchor.bestClassic
                if let best {
                    for (name, _) in policies { gaps[name, default: []].append((label, (rates[name] ?? 0) - best)) }
                }
                if anchor.size < shardingThreshold, let exact = anchor.rates["LRU"],
                    abs((rates[EvictionPolicy.lru.description] ?? 0) - exact) > 0.05
                {
                    harnessProblems.append(
                        String(format: "%@: Hoard lru %.2f ≠ exact LRU %.2f", label, rates["lru"] ?? 0, exact)
                    )
                }
                if let optimum = anchor.rates["OPT"] {
                    for (name, _) in policies where (rates[name] ?? 0) > optimum + 0.005 {
                        harnessProblems.append(
                            String(format: "%@: %@ %.2f above OPT %.2f", label, name, rates[name] ?? 0, optimum)
                        )
                    }
                }
                report.lines.append(
                    trace.name.padding(toLength: 10, withPad: " ", startingAt: 0) + pad("\(anchor.size)", 6)
                        + policies.map { pad(String(format: "%.1f", rates[$0.name] ?? 0), 10) }.joined()
                        + (classicColumns + ["OPT"]).map { column in
                            pad(anchor.rates[column].map { String(format: "%.1f", $0) } ?? "–", 9)
                        }.joined()
                        + pad(best.map { String(format: "%.1f", $0) } ?? "–", 9)
                        + pad(best.map { String(format: "%+.1f", (rates["default"] ?? 0) - $0) } ?? "–", 7)
                )
            }
        }
        report.lines.append("")
        report.lines.append("policy       rows within 1.5 of the best classic   mean gap   worst row")
        for (name, _) in policies {
            let rows = gaps[name] ?? []
            guard let worst = rows.min(by: { $0.gap < $1.gap }) else { continue }
            let mean = rows.map(\.gap).reduce(0, +) / Double(rows.count)
            let within = rows.filter { $0.gap >= -1.5 }.count
            report.lines.append(
                name.padding(toLength: 12, withPad: " ", startingAt: 0)
                    + pad("\(within) of \(rows.count)", 34)
                    + pad(String(format: "%+.2f", mean), 11)
                    + String(format: "   %+.1f (%@)", worst.gap, worst.row)
            )
            report.summaryText.append(
                String(
                    format:
                        "real traces, %@: %d of %d rows within 1.5 points of the best classic, mean gap %+.2f, worst %+.1f (%@)",
                    name,
                    within,
                    rows.count,
                    mean,
                    worst.gap,
                    worst.row
                )
            )
        }
        report.lines.append(
            "best = the best of lru, arc, lirs, s3fifo and w-tinylfu (static, 1 % window) on the row; "
                + "gap = default − best, in points."
        )
        if harnessProblems.isEmpty {
            report.lines.append(
                "harness checks: Hoard's lru equals the exact LRU column on every unsharded row; nothing beats OPT."
            )
        } else {
            report.notes += harnessProblems
        }
        report.targets += targets(
            gaps: gaps["default"] ?? [],
            defaultRates: defaultRates,
            harnessProblems: harnessProblems
        )
        report.checksum = checksum
        return report
    }

    /// The hit-rate targets of the default policy on real traces.
    static func targets(
        gaps: [(row: String, gap: Double)],
        defaultRates: [String: Double],
        harnessProblems: [String]
    ) -> [TargetCheck] {
        var checks: [TargetCheck] = []
        if let worst = gaps.min(by: { $0.gap < $1.gap }) {
            checks.append(
                TargetCheck(
                    target: "real traces: default ≥ best classic − 1.5 on every row",
                    measured: String(format: "worst %+.1f (%@)", worst.gap, worst.row),
                    holds: worst.gap >= -1.5
                )
            )
            let mean = gaps.map(\.gap).reduce(0, +) / Double(gaps.count)
            checks.append(
                TargetCheck(
                    target: "real traces: mean of (default − best classic) ≥ 0",
                    measured: String(format: "%+.2f over %d rows", mean, gaps.count),
                    holds: mean >= 0
                )
            )
        }
        for (row, minimum) in [("oltp@1000", 40.0), ("oltp@2000", 46.0)] {
            guard let rate = defaultRates[row] else { continue }
            checks.append(
                TargetCheck(
                    target: String(format: "real traces: default on %@ ≥ %.1f", row, minimum),
                    measured: String(format: "%.1f", rate),
                    holds: rate >= minimum
                )
            )
        }
        checks.append(
            TargetCheck(
                target: "real traces: harness (lru = exact LRU, nothing above OPT)",
                measured: harnessProblems.isEmpty ? "ok" : "\(harnessProblems.count) problem(s)",
                holds: harnessProblems.isEmpty
            )
        )
        return checks
    }

    // MARK: - Reading the folder

    /// Every trace in `directory` with its anchors, in name order.
    static func loadTraces(in directory: String, sizes: [Int]?) throws -> [Trace] {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
        let anchors = try loadAnchors(URL(fileURLWithPath: directory).appendingPathComponent("anchors.json").path)
        var traces: [Trace] = []
        for file in names {
            let name: String
            if file.hasSuffix(".txt.gz") {
                name = String(file.dropLast(7))
            } else if file.hasSuffix(".txt") {
                name = String(file.dropLast(4))
            } else {
                continue
            }
            let path = URL(fileURLWithPath: directory).appendingPathComponent(file).path
            progress("  reading \(file)")
            let requests = try readRequests(path, compressed: file.hasSuffix(".gz"))
            let rows =
                sizes.map { sizes in
                    sizes.map { size in anchors[name]?.first { $0.size == size } ?? AnchorRow(size: size, rates: [:]) }
                } ?? anchors[name] ?? []
            guard !rows.isEmpty else {
                progress("  \(file): no sizes in anchors.json and no --sizes; skipped")
                continue
            }
            traces.append(Trace(name: name, requests: requests, distinct: (requests.max() ?? -1) + 1, anchors: rows))
        }
        return traces
    }

    /// `anchors.json`: trace name → rows, each a "size" and a rate per policy; empty when absent.
    static func loadAnchors(_ path: String) throws -> [String: [AnchorRow]] {
        guard let data = FileManager.default.contents(atPath: path) else { return [:] }
        guard let root = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw BenchError("anchors.json is not an object of traces")
        }
        var anchors: [String: [AnchorRow]] = [:]
        for (trace, value) in root {
            guard let rows = (value as? [String: Any])?["rows"] as? [[String: Any]] else { continue }
            anchors[trace] = rows.compactMap { row in
                guard let size = row["size"] as? Int else { return nil }
                var rates: [String: Double] = [:]
                for (column, rate) in row where column != "size" {
                    if let rate = rate as? Double {
                        rates[column] = rate
                    } else if let rate = rate as? Int {
                        rates[column] = Double(rate)
                    }
                }
                return AnchorRow(size: size, rates: rates)
            }.sorted { $0.size < $1.size }
        }
        return anchors
    }

    /// The ids of a trace file, one per line (through `gzip -dc` when compressed).
    static func readRequests(_ path: String, compressed: Bool) throws -> [Int] {
        let data: Data
        if compressed {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["gzip", "-dc", path]
            let pipe = Pipe()
            process.standardOutput = pipe
            try process.run()
            data = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else { throw BenchError("gzip -dc \(path) failed") }
        } else {
            guard let contents = FileManager.default.contents(atPath: path) else {
                throw BenchError("cannot read \(path)")
            }
            data = contents
        }
        var requests: [Int] = []
        requests.reserveCapacity(data.count / 6)
        var current = 0
        var inNumber = false
        for byte in data {
            if byte >= 0x30 && byte <= 0x39 {
                current = current * 10 + Int(byte - 0x30)
                inNumber = true
            } else {
                if inNumber { requests.append(current) }
                current = 0
                inNumber = false
            }
        }
        if inNumber { requests.append(current) }
        return requests
    }
}
