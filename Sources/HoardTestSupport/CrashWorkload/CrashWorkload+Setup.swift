import Hoard

extension CrashWorkload {
    /// One run of the crash workload: where it writes, its seed and length, and the cache's limits.
    ///
    /// The test process passes `arguments` to `hoard-test-worker crash`, which reads them back with
    /// `init(arguments:)`:
    /// ```
    /// <folder> <container> <seed> <operations> <maxDiskCount> <maxRamCount> <policy> [<maxDiskBytes>]
    /// ```
    package struct Setup: Hashable, Sendable {
        /// The folder that holds the container.
        package var folder: String
        /// The cache's container name.
        package var container: String
        /// The seed of the workload's `SplitMix64`: equal setups run equal workloads.
        package var seed: UInt64
        /// How many operations the workload runs (at least one).
        package var operations: Int
        /// The cache's disk limit.
        package var maxDiskCount: Int
        /// The cache's memory limit.
        package var maxRamCount: Int
        /// The cache's eviction policy.
        package var policy: EvictionPolicy
        /// The cache's byte limit (`maxDiskBytes`), if any.
        package var maxDiskBytes: Int?

        /// Creates a setup.
        package init(
            folder: String,
            container: String,
            seed: UInt64,
            operations: Int,
            maxDiskCount: Int,
            maxRamCount: Int,
            policy: EvictionPolicy,
            maxDiskBytes: Int? = nil
        ) {
            self.folder = folder
            self.container = container
            self.seed = seed
            self.operations = operations
            self.maxDiskCount = maxDiskCount
            self.maxRamCount = maxRamCount
            self.policy = policy
            self.maxDiskBytes = maxDiskBytes
        }

        /// Reads a setup from the worker's arguments (after the mode); `nil` unless they are exactly
        /// what `arguments` writes.
        package init?(arguments: [String]) {
            guard arguments.count == 7 || arguments.count == 8, let seed = UInt64(arguments[2]),
                let operations = Int(arguments[3]), let maxDiskCount = Int(arguments[4]),
                let maxRamCount = Int(arguments[5]),
                let policy = EvictionPolicy.allCases.first(where: { $0.description == arguments[6] })
            else { return nil }
            var maxDiskBytes: Int?
            if arguments.count == 8 {
                guard let bytes = Int(arguments[7]) else { return nil }
                maxDiskBytes = bytes
            }
            self.init(
                folder: arguments[0],
                container: arguments[1],
                seed: seed,
                operations: operations,
                maxDiskCount: maxDiskCount,
                maxRamCount: maxRamCount,
                policy: policy,
                maxDiskBytes: maxDiskBytes
            )
        }

        /// The worker's arguments for this setup, after the mode `crash`.
        package var arguments: [String] {
            [folder, container, "\(seed)", "\(operations)", "\(maxDiskCount)", "\(maxRamCount)", "\(policy)"]
                + (maxDiskBytes.map { ["\($0)"] } ?? [])
        }

        /// Whether the disk may evict: with fewer disk slots than keys, or a byte limit, a read may
        /// miss a value that was set.
        package var mayEvict: Bool { maxDiskCount < CrashWorkload.keyCount || maxDiskBytes != nil }
    }
}
