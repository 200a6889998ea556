import Foundation
import Hoard

// The disk scenarios. Every Hoard cache here writes 1 KiB `Data` values through `DataSerializer`,
// so what is measured is the disk level (hashing, entry encoding, files), not a serializer.

/// The size of every value and baseline file.
private let payloadSize = 1_024

/// `disk-set` and `disk-set-100k`: sets of 1 KiB (or 100 KiB) values, then `flush()`, on a fresh
/// container per run.
enum DiskSet {
    static let hoard = "Hoard set + flush"
    static let hoardCalls = "Hoard set calls only"
    static let posix = "POSIX openat+write+close+rename"
    static let foundation = "Data.write(to:options: .atomic)"

    /// 10 000 sets of 1 KiB.
    static func run(_ context: BenchContext) async throws -> ScenarioReport {
        try await withScratchFolders { scratch in
            try await run(
                context,
                name: "disk-set",
                size: payloadSize,
                count: context.size(10_000),
                foundationCount: context.size(2_000),
                scratch: scratch
            )
        }
    }

    /// 1 000 sets of 100 KiB.
    static func runLarge(_ context: BenchContext) async throws -> ScenarioReport {
        try await withScratchFolders { scratch in
            try await run(
                context,
                name: "disk-set-100k",
                size: 100 * 1_024,
                count: context.size(1_000),
                foundationCount: context.size(500),
                scratch: scratch
            )
        }
    }

    private static func run(
        _ context: BenchContext,
        name: String,
        size: Int,
        count: Int,
        foundationCount: Int,
        scratch: ScratchFolders
    ) async throws -> ScenarioReport {
        let capacity = count * 2
        let sizeName = "\(size / 1_024) KiB"
        let keys = makeKeys(count)
        let payload = noise(count: size, seed: 0x4449_534B)
        var report = ScenarioReport(
            name: name,
            title:
                "\(grouped(count)) sets of \(sizeName) Data (maxRamCount 100, maxDiskCount \(grouped(capacity))) then "
                + "flush(), fresh container per run, no fsync"
        )
        var checksum: UInt64 = 0

        // How long the set calls took, before flush(); a set returns after the memory update and
        // queues the write, so this is what a caller waits for.
        var callDurations: [Duration] = []
        let hoardRun: () async throws -> Duration = {
            let folder = try scratch.fresh()
            let cache = try CacheBuilder<Data>(serializer: DataSerializer())
                .containerName("hoard")
                .directory(folder)
                .maxRamCount(100)
                .maxDiskCount(capacity)
                .build()
            let clock = ContinuousClock()
            let start = clock.now
            for key in keys { cache[key] = payload }
            let callsDone = clock.now
            await cache.flush()
            let elapsed = start.duration(to: clock.now)
            callDurations.append(start.duration(to: callsDone))
            let entryFiles = try FileManager.default.contentsOfDirectory(
                atPath: folder.appendingPathComponent("hoard").path
            )
            .filter { $0.count == 64 }.count
            checksum &+= UInt64(cache.diskCount) &+ UInt64(entryFiles)
            if cache.diskCount != count || entryFiles != count {
                report.notes.append(
                    "\(hoard): diskCount \(cache.diskCount), \(entryFiles) entry files after flush; expected \(count)"
                )
            }
            return elapsed
        }

        let names = entryLikeNames(count)
        let temporaryNames = (0..<count).map { "tmp-\($0)" }
        let bytes = [UInt8](payload)
        let posixRun: () async throws -> Duration = {
            let url = try scratch.fresh()
            let folder = try OpenFolder(url)
            let elapsed = try time {
                try PosixFiles.write(bytes, names: names, temporaryNames: temporaryNames, in: folder)
            }
            checksum &+= UInt64(try FileManager.default.contentsOfDirectory(atPath: url.path).count)
            return elapsed
        }

        let foundationRun: () async throws -> Duration = {
            let url = try scratch.fresh()
            let files = names.prefix(foundationCount).map { url.appendingPathComponent($0) }
            let elapsed = try time {
                for file in files { try payload.write(to: file, options: .atomic) }
            }
            checksum &+= UInt64(try FileManager.default.contentsOfDirectory(atPath: url.path).count)
            return elapsed
        }

        // Round-robin, so that a drift in the file system's state reaches every row alike.
        let rows = try await measureInterleaved(
            [
                Contender(label: hoard, operations: count, run: hoardRun),
                Contender(label: posix, operations: count, run: posixRun),
                Contender(label: foundation, operations: foundationCount, run: foundationRun),
            ],
            plan: context.plan
        )
        let warmups = context.plan.warmups
        report.rows = [
            rows[0],
            Measurement(label: hoardCalls, operations: count, durations: Array(callDurations.dropFirst(warmups))),
        ]
        report.rows += rows[1...]
        report.unrated = [hoardCalls]
        report.reference = posix
        report.comparisons = [(hoard, posix), (hoard, foundation)]
        report.notes =
            [
                "\(hoardCalls): the same runs, timed until the last set returned (sets return after the memory update)",
                "\(foundation) writes \(grouped(foundationCount)) files per run (it is slow; on Linux it also calls fsync, "
                    + "which the others do not); its rate is per second like the others",
                "rows measured round-robin, one run of each in turn; every run writes into a fresh folder, "
                    + "and the folders are removed when the scenario ends",
                "on ext4 without a journal, file creation slows down (up to 20×) for minutes after many files were "
                    + "deleted (by a previous run, by tests): compare ratios, or set TMPDIR (e.g. /dev/shm) to measure elsewhere",
            ] + report.notes
        report.summary = [
            ("disk set + flush (\(sizeName))", hoard),
            ("disk set calls only (\(sizeName), before flush)", hoardCalls),
            ("disk set baseline POSIX open+write+close+rename (\(sizeName))", posix),
            ("disk set baseline Data.write(.atomic) (\(sizeName))", foundation),
        ]
        if size == payloadSize {
            report.targets = [
                .rate("disk set 1 KiB (set + flush) ≥ 15 000/s", report.row(hoard), atLeast: 15_000),
                .ratio("disk set 1 KiB ≥ 0.5× POSIX write+rename", report.row(hoard), report.row(posix), atLeast: 0.5),
            ]
        }
        report.checksum = checksum
        return report
    }
}

/// `disk-get`: every key read once, in random order, through `cache[key]` on a cache whose memory
/// level is off, so every get reads its entry file.
enum DiskGet {
    static let hoard = "Hoard get (memory off)"
    static let posix = "POSIX openat+fstat+read+close"
    static let foundation = "Data(contentsOf:)"

    static func run(_ context: BenchContext) async throws -> ScenarioReport {
        try await withScratchFolders { scratch in try await run(context, scratch: scratch) }
    }

    private static func run(_ context: BenchContext, scratch: ScratchFolders) async throws -> ScenarioReport {
        let count = context.size(10_000)
        let capacity = context.size(20_000)
        let keys = makeKeys(count)
        let payload = noise(count: payloadSize, seed: 0x4745_5453)
        let order = shuffledIndices(count: count, seed: 0x4F52_4452)
        var report = ScenarioReport(
            name: "disk-get",
            title: "\(grouped(count)) gets of 1 KiB entries in random order, memory level off (maxRamCount 0), "
                + "warm page cache"
        )
        var checksum: UInt64 = 0

        // Write the entries with a first cache, in a scope of its own so that it is released before
        // the readers open the container.
        let container = try scratch.fresh()
        do {
            let writer = try CacheBuilder<Data>(serializer: DataSerializer())
                .containerName("hoard")
                .directory(container)
                .maxRamCount(100)
                .maxDiskCount(capacity)
                .evictionPolicy(.lru)
                .build()
            for key in keys { writer[key] = payload }
            await writer.flush()
            if writer.diskCount != count {
                report.notes.append("writer: diskCount \(writer.diskCount) after flush, expected \(count)")
            }
        }
        let reader = CacheBuilder<Data>(serializer: DataSerializer())
            .containerName("hoard")
            .directory(container)
            .maxRamCount(0)
            .maxDiskCount(capacity)
            .evictionPolicy(.lfu)
        let hoardRun: () async throws -> Duration = {
            // A fresh cache per run, on a disk store of its own (the previous run's has closed).
            let cache = try await openAlone(reader, notes: &report.notes)
            var hits = 0
            var sum: UInt64 = 0
            let elapsed = time {
                for index in order {
                    guard let value = cache[keys[index]] else { continue }
                    hits += 1
                    sum &+= UInt64(value.count) &+ UInt64(value.first ?? 0)
                }
            }
            checksum &+= sum
            if hits != count { report.notes.append("\(hoard): \(hits) hits of \(count)") }
            return elapsed
        }

        // The same number of plain files of the payload's size, for the baselines.
        let plain = try scratch.fresh()
        let folder = try OpenFolder(plain)
        let names = entryLikeNames(count)
        try PosixFiles.write([UInt8](payload), names: names, temporaryNames: names.map { "tmp-" + $0 }, in: folder)
        let posixRun: () async throws -> Duration = {
            var sum: UInt64 = 0
            let elapsed = try time { sum = try PosixFiles.read(names: names, order: order, in: folder) }
            checksum &+= sum
            return elapsed
        }

        let files = names.map { plain.appendingPathComponent($0) }
        let foundationRun: () async throws -> Duration = {
            var sum: UInt64 = 0
            let elapsed = try time {
                for index in order {
                    let data = try Data(contentsOf: files[index])
                    sum &+= UInt64(data.count) &+ UInt64(data.first ?? 0)
                }
            }
            checksum &+= sum
            return elapsed
        }

        report.rows = try await measureInterleaved(
            [
                Contender(label: hoard, operations: count, run: hoardRun),
                Contender(label: posix, operations: count, run: posixRun),
                Contender(label: foundation, operations: count, run: foundationRun),
            ],
            plan: context.plan
        )
        report.reference = posix
        report.comparisons = [(hoard, posix), (hoard, foundation)]
        report.summary = [
            ("disk get (1 KiB, memory off)", hoard),
            ("disk get baseline POSIX open+fstat+read+close", posix),
            ("disk get baseline Data(contentsOf:)", foundation),
        ]
        report.targets = [
            .rate("disk get 1 KiB (fresh instance) ≥ 80 000/s", report.row(hoard), atLeast: 80_000),
            .ratio("disk get 1 KiB ≥ 0.8× POSIX read", report.row(hoard), report.row(posix), atLeast: 0.8),
        ]
        report.checksum = checksum
        return report
    }

    /// Builds a cache that has the container's disk store to itself.
    ///
    /// Caches on one container share its disk store while one of them is alive, and the writer's
    /// store can outlive the writer cache by a moment (its background writer finishes its loop after
    /// `flush()` has returned). The readers ask for another eviction policy than the writer, so while
    /// the writer's store is open, building a reader throws `invalidConfiguration`; then the build is
    /// retried.
    static func openAlone(_ builder: CacheBuilder<Data>, notes: inout [String]) async throws -> Cache<Data> {
        for attempt in 0..<500 {
            do {
                let cache = try builder.build()
                if attempt > 0 {
                    notes.append("a reader waited \(attempt * 10) ms for the writer's disk store to close")
                }
                return cache
            } catch CacheError.invalidConfiguration {
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        throw BenchError("the writer's disk store was still open after 5 s")
    }
}
