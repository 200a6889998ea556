import Foundation
import Hoard

#if canImport(Glibc)
import Glibc
#endif

/// `memory-per-entry`: the resident memory a memory-only `Cache<Int>` takes per entry at 1M
/// entries, against a plain `Dictionary<String, Int>` and the plain LRU baseline.
///
/// Every measurement runs in a child process of its own (this binary, re-run with
/// ``childArgument``), so that nothing a scenario allocated earlier, nor a previous measurement,
/// sits in the heap being measured. The child makes its keys, reads `VmRSS` from
/// `/proc/self/status`, fills one container, reads `VmRSS` again and prints the growth.
enum MemoryPerEntry {
    /// The hidden first argument that makes `hoard-bench` a measuring child.
    static let childArgument = "--memory-per-entry-child"

    /// What a child can fill.
    enum Subject: String, CaseIterable {
        case hoardLRU = "hoard-lru"
        case hoardLFU = "hoard-lfu"
        case hoardWTinyLFU = "hoard-w-tinylfu"
        case dictionary
        case plainLRU = "plain-lru"

        var label: String {
            switch self {
            case .hoardLRU: "Hoard Cache<Int> lru"
            case .hoardLFU: "Hoard Cache<Int> lfu"
            case .hoardWTinyLFU: "Hoard Cache<Int> w-tinylfu"
            case .dictionary: "Dictionary<String, Int>"
            case .plainLRU: "plain LRU behind one lock"
            }
        }

        /// The eviction policy of a Hoard subject.
        var policy: EvictionPolicy? {
            switch self {
            case .hoardLRU: .lru
            case .hoardLFU: .lfu
            case .hoardWTinyLFU: .wTinyLFU
            case .dictionary, .plainLRU: nil
            }
        }
    }

    static func run(_ context: BenchContext) async throws -> ScenarioReport {
        let count = context.size(1_000_000)
        var report = ScenarioReport(
            name: "memory-per-entry",
            title:
                "resident memory per entry after filling with \(grouped(count)) String keys (\"k123456\") and Int "
                + "values, each fill in a fresh child process"
        )
        #if !os(Linux)
        report.notes.append("needs /proc/self/status (Linux); not measured")
        return report
        #else
        let started = ContinuousClock.now
        // Bytes per entry for every run of every subject: (growth, payload).
        var results: [Subject: [(growth: Double, payload: Double)]] = [:]
        for _ in 0..<context.plan.runs {
            // Round-robin, like the timed scenarios.
            for subject in Subject.allCases {
                let (growth, payload) = try await measureInChild(subject, count: count)
                results[subject, default: []].append((growth / Double(count), payload / Double(count)))
            }
        }
        report.lines.append(
            "name                        growth/entry (min – max)   key+value/entry   overhead/entry (min – max)"
        )
        var checksum: UInt64 = 0
        for subject in Subject.allCases {
            let runs = results[subject] ?? []
            let growths = runs.map(\.growth).sorted()
            let payload = runs.first?.payload ?? 0
            let overheads = growths.map { $0 - payload }
            let median = middle(growths)
            checksum &+= UInt64(max(0, median))
            report.lines.append(
                subject.label.padding(toLength: 28, withPad: " ", startingAt: 0)
                    + pad(String(format: "%.1f B (%.1f – %.1f)", median, growths.first ?? 0, growths.last ?? 0), 26)
                    + pad(String(format: "%.0f B", payload), 18)
                    + pad(
                        String(
                            format: "%.1f B (%.1f – %.1f)",
                            median - payload,
                            overheads.first ?? 0,
                            overheads.last ?? 0
                        ),
                        29
                    )
            )
            report.summaryText.append(
                "memory per entry, \(subject.label): "
                    + String(
                        format: "%.1f B total, %.0f B key+value, %.1f B overhead",
                        median,
                        payload,
                        median - payload
                    )
            )
            if let policy = subject.policy {
                report.targets.append(
                    TargetCheck(
                        target:
                            "memory overhead (\(policy)\(policy == .wTinyLFU ? ", the default" : "")) ≤ 100 B per entry",
                        measured: String(format: "%.1f B", median - payload),
                        holds: median - payload <= 100
                    )
                )
            }
        }
        report.notes += [
            "growth = (VmRSS after − VmRSS before) ÷ entries; the keys array exists before the first reading and "
                + "is kept alive until after the second, so only the container's own copies count; malloc_trim(0) "
                + "before each reading",
            "key+value = MemoryLayout<String>.size + MemoryLayout<Int>.size (the keys are small strings, "
                + "stored inline); overhead = growth − key+value",
            "\(context.plan.runs) child processes per row, medians; took "
                + String(format: "%.1f s", started.duration(to: .now).seconds),
        ]
        report.checksum = checksum
        return report
        #endif
    }

    private static func middle(_ sorted: [Double]) -> Double {
        guard !sorted.isEmpty else { return 0 }
        let half = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[half] : (sorted[half - 1] + sorted[half]) / 2
    }

    /// Runs this binary as a child that fills `subject`; returns the growth and the payload in bytes.
    private static func measureInChild(_ subject: Subject, count: Int) async throws -> (Double, Double) {
        let (status, text) = try await runThisBinary([childArgument, subject.rawValue, String(count)])
        let numbers = text.split(whereSeparator: \.isWhitespace).compactMap { Double($0) }
        guard status == 0, numbers.count == 2 else {
            throw BenchError("memory-per-entry child for \(subject.rawValue) failed (status \(status)): \(text)")
        }
        return (numbers[0], numbers[1])
    }

    /// The child's side: fills one container and prints `growth payload` in bytes; returns the exit code.
    static func runChild(_ arguments: [String]) -> Int32 {
        guard arguments.count == 2, let subject = Subject(rawValue: arguments[0]), let count = Int(arguments[1]),
            count > 0
        else {
            progress(
                "usage: hoard-bench \(childArgument) <\(Subject.allCases.map(\.rawValue).joined(separator: "|"))> <count>"
            )
            return 2
        }
        let keys = (0..<count).map { "k\($0)" }
        // Small strings (up to 15 UTF-8 bytes) live inside the String value: no heap bytes of their own.
        guard keys.allSatisfy({ $0.utf8.count <= 15 }) else {
            progress("keys too long to be small strings")
            return 1
        }
        let payload = count * (MemoryLayout<String>.size + MemoryLayout<Int>.size)
        let before = residentBytes()
        // The second reading, with the keys and the container alive: Swift may release a value after
        // its last use, and the keys' array (16 B per key) would then leave the reading.
        func after<Container>(_ container: Container) -> Int {
            withExtendedLifetime(keys) { withExtendedLifetime(container) { residentBytes() } }
        }
        var checksum = 0
        switch subject {
        case .hoardLRU, .hoardLFU, .hoardWTinyLFU:
            guard let policy = subject.policy,
                let cache = try? memoryOnlyCache(capacity: count, policy: policy)
            else {
                progress("cannot build the cache")
                return 1
            }
            for (value, key) in keys.enumerated() { cache[key] = value }
            print(after(cache) - before, payload)
            checksum = cache.memoryCount
        case .dictionary:
            var dictionary: [String: Int] = [:]
            for (value, key) in keys.enumerated() { dictionary[key] = value }
            print(after(dictionary) - before, payload)
            checksum = dictionary.count
        case .plainLRU:
            let lru = PlainLRU<String, Int>(capacity: count)
            for (value, key) in keys.enumerated() { lru.set(value, forKey: key) }
            print(after(lru) - before, payload)
            checksum = lru.entryCount
        }
        guard checksum == count else {
            progress("\(subject.rawValue) holds \(checksum) entries, expected \(count)")
            return 1
        }
        return 0
    }
}

/// Runs this binary with `arguments` (a measuring child) and returns its exit status and standard output.
func runThisBinary(_ arguments: [String]) async throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = Bundle.main.executableURL ?? URL(fileURLWithPath: "/proc/self/exe")
    process.arguments = arguments
    let output = Pipe()
    process.standardOutput = output
    let status: Int32 = try await withCheckedThrowingContinuation { continuation in
        process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
        do {
            try process.run()
        } catch {
            process.terminationHandler = nil
            continuation.resume(throwing: error)
        }
    }
    return (status, String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
}

/// The process's resident set size in bytes (`VmRSS`), after returning free heap memory to the system.
func residentBytes() -> Int {
    #if canImport(Glibc)
    // glibc's malloc_trim (in <malloc.h>, which the Glibc module does not import).
    if let symbol = dlsym(nil, "malloc_trim") {
        _ = unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)(0)
    }
    #endif
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
    else { return 0 }
    let kilobytes = line.split(whereSeparator: \.isWhitespace).dropFirst().first.flatMap { Int($0) } ?? 0
    return kilobytes * 1_024
}
