/// One benchmark scenario: a CLI name and a function that measures and reports.
struct Scenario: Sendable {
    /// The name given on the command line.
    let name: String
    /// One line for `--help`.
    let help: String
    /// Measures and returns the scenario's report.
    let run: @Sendable (BenchContext) async throws -> ScenarioReport
}

/// Every scenario, in the order `hoard-bench` without arguments runs them.
///
/// To add one, write a `static func run(_ context: BenchContext) async throws -> ScenarioReport`
/// (see `MemoryScenarios.swift`) and list it here.
enum ScenarioRegistry {
    static let all: [Scenario] = [
        Scenario(
            name: "memory-get",
            help: "1M uniform random subscript gets over 100k keys, memory only (lru, lfu, baselines)",
            run: MemoryGet.run
        ),
        Scenario(
            name: "memory-set",
            help: "200k sets of distinct keys into a 10k-entry memory-only cache (lru, lfu)",
            run: MemorySet.run
        ),
        Scenario(
            name: "disk-set",
            help: "10k sets of 1 KiB Data, then flush; POSIX and Foundation baselines",
            run: DiskSet.run
        ),
        Scenario(
            name: "disk-get",
            help: "10k random gets of 1 KiB entries with memory off; POSIX and Foundation baselines",
            run: DiskGet.run
        ),
        Scenario(
            name: "compose-get",
            help: "async hits in the first level of memory.compose(disk) vs direct MemoryCacheLevel gets",
            run: ComposeGet.run
        ),
        Scenario(
            name: "hitrate",
            help: "hit rates of every policy next to Belady's optimum: static Zipf, scans, a moving hot set",
            run: HitRate.run
        ),
    ]

    static func named(_ name: String) -> Scenario? { all.first { $0.name == name } }
}
