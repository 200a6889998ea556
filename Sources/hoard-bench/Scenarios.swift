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
        // First: it measures in child processes, but a fresh parent heap keeps it clean either way.
        Scenario(
            name: "memory-per-entry",
            help:
                "resident memory per entry at 1M String keys in a memory-only Cache<Int> vs Dictionary (child processes)",
            run: MemoryPerEntry.run
        ),
        Scenario(
            name: "memory-get",
            help: "1M uniform random subscript gets over 100k keys, memory only (lru, lfu, baselines incl. plain LRU)",
            run: MemoryGet.run
        ),
        Scenario(
            name: "memory-set",
            help: "200k sets of distinct keys into a 10k-entry memory-only cache (lru, lfu, plain LRU)",
            run: MemorySet.run
        ),
        Scenario(
            name: "memory-set-anatomy",
            help:
                "what an evicting set costs: Hoard vs plain LRU variants, and the price of a hash, a lock, two getters",
            run: MemorySetAnatomy.run
        ),
        Scenario(
            name: "zipf",
            help:
                "1M get-or-set on Zipf(0.99) over 1M keys into a 10k-entry memory-only cache (every policy, plain LRU)",
            run: ZipfGetOrSet.run
        ),
        Scenario(
            name: "callstyles",
            help:
                "memory hits via the subscript, await getOrFetch (main actor, detached task) and asyncGet; a plain queue's awaited callback",
            run: CallStyles.run
        ),
        Scenario(
            name: "threads",
            help: "90 % get / 10 % set on 1 and 2 plain Threads (Hoard, Mutex<Dictionary>, plain LRU)",
            run: ThreadsMixed.run
        ),
        Scenario(
            name: "shared-drain",
            help: "a backlog of 10k and of 100k shared-level writes drained while flush() waits (in-process level)",
            run: SharedDrain.run
        ),
        Scenario(
            name: "disk-set",
            help: "10k sets of 1 KiB Data, then flush; POSIX and Foundation baselines",
            run: DiskSet.run
        ),
        Scenario(
            name: "disk-set-100k",
            help: "1k sets of 100 KiB Data, then flush; POSIX and Foundation baselines",
            run: DiskSet.runLarge
        ),
        Scenario(
            name: "disk-get",
            help: "10k random gets of 1 KiB entries with memory off; POSIX and Foundation baselines",
            run: DiskGet.run
        ),
        Scenario(
            name: "disk-open",
            help:
                "open a container of 10k / 100k / 1M entries, with its index and after deleting it; memory per entry "
                + "(HOARD_BENCH_DISK_OPEN_SIZES=100000 measures only the sizes it lists)",
            run: DiskOpen.run
        ),
        Scenario(
            name: "compose-get",
            help: "async hits in the first level of memory.compose(disk) vs direct MemoryCacheLevel gets",
            run: ComposeGet.run
        ),
        Scenario(
            name: "redis",
            help:
                "RedisCacheLevel GET/SET of 1 KiB at 16 and 64 in flight vs redis-benchmark; memory hit vs shared hit",
            run: RedisBench.run
        ),
        Scenario(
            name: "redis-transports",
            help:
                "RedisCacheLevel over TLS vs plain TCP vs redis-benchmark --tls at 16 and 64 in flight; Unix socket vs TCP",
            run: RedisTransportBench.run
        ),
        Scenario(
            name: "redis-cluster",
            help:
                "RedisCacheLevel on clusters of 1, 2 and 3 primaries it starts vs redis-benchmark --cluster, "
                + "GET/SET of 1 KiB at 16 and 64 in flight",
            run: RedisClusterBench.run
        ),
        Scenario(
            name: "coherence",
            help:
                "coherence(.invalidations): invalidation latency in one and two processes, fleet throughput vs TTL-only, "
                + "own saves kept, reads during server outages",
            run: CoherenceBench.run
        ),
        Scenario(
            name: "lease",
            help:
                "fleetSingleFetch: origin calls per key and miss latency, 4 processes × 32 callers on the same cold keys, "
                + "leases on and off",
            run: LeaseBench.run
        ),
        Scenario(
            name: "hitrate",
            help: "hit rates of every policy next to Belady's optimum: static Zipf, scans, a moving hot set",
            run: HitRate.run
        ),
    ]

    static func named(_ name: String) -> Scenario? { all.first { $0.name == name } }
}
