import Foundation
import Hoard

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `disk-open`: what opening a container costs as it grows, at 10 000, 100 000 and 1 000 000
/// entries of 256 bytes (or the sizes `HOARD_BENCH_DISK_OPEN_SIZES` lists: `100000`, `10000,100000`).
///
/// The containers are filled once, through the public API, and kept between runs in the system's
/// temporary folder (`hoard-bench-containers/`, or `HOARD_BENCH_CONTAINERS`); a container whose
/// fill did not finish is filled again. Every open runs in a child process of its own (this binary,
/// re-run with ``childArgument``), so that nothing the parent allocated sits in the heap being
/// measured and every open starts from a closed container, as an app's launch does. Each child
/// builds the cache (memory level off), reads one present key, asks `diskCount` (which waits for
/// the index, loaded in the background), and reports the three durations, the resident memory the
/// open added once the index is loaded, and `diskCount`.
///
/// Two kinds of open, interleaved: with the index the last close saved, and after the index files
/// (every file of the container named `.hoard-index…` or `.hoard-journal…`) are deleted, which makes
/// the cache rebuild its index from the entry files; that child's close saves a valid index again.
/// The baselines, in the same run: reading the index files' bytes, and listing the container's
/// folders (names only, no `stat`).
enum DiskOpen {
    /// The hidden first argument that makes `hoard-bench` an opening child.
    static let childArgument = "--disk-open-child"
    /// The size of every value.
    static let valueSize = 256
    /// The name of the container inside its folder.
    private static let containerName = "c"

    /// The two ways a child opens a container.
    enum Mode: String {
        /// With the index saved by the last close.
        case indexed
        /// After the index files were deleted.
        case rebuild
    }

    /// What one child measured.
    struct Opening {
        var build: Double
        var firstRead: Double
        /// From the start of `build()` until `diskCount` answered: the index is loaded.
        var loaded: Double
        var growth: Double
        var diskCount: Int
    }

    static func run(_ context: BenchContext) async throws -> ScenarioReport {
        let sizes = chosenSizes ?? (context.quick ? [1_000, 10_000] : [10_000, 100_000, 1_000_000])
        var report = ScenarioReport(
            name: "disk-open",
            title:
                "open a container of \(sizes.map(grouped).joined(separator: " / ")) entries of \(valueSize) B "
                + "(memory level off), each open in a fresh child process"
        )
        report.lines.append(
            pad("entries", 9) + pad("open, index saved", 21) + pad("first read", 13) + pad("open + read", 14)
                + pad("index loaded", 15) + pad("open, index deleted", 22) + pad("memory/entry", 15)
                + pad("read index files", 19) + pad("list folders", 15)
        )
        var checksum: UInt64 = 0
        for size in sizes {
            let folder = try await prepareContainer(entries: size)
            let runs = size >= 1_000_000 ? min(3, context.plan.runs) : context.plan.runs
            var indexed: [Opening] = []
            var rebuilt: [Opening] = []
            var readingIndex: [Double] = []
            var listing: [Double] = []
            // One warm-up open (it also leaves a saved index), then interleaved measured runs.
            _ = try await measureOpening(folder, entries: size, mode: .indexed)
            for _ in 0..<runs {
                indexed.append(try await measureOpening(folder, entries: size, mode: .indexed))
                readingIndex.append(try time { checksum &+= UInt64(try readIndexFiles(of: folder)) }.seconds)
                listing.append(try time { checksum &+= UInt64(try listFolders(of: folder)) }.seconds)
                try deleteIndexFiles(of: folder)
                rebuilt.append(try await measureOpening(folder, entries: size, mode: .rebuild))
            }
            for opening in indexed + rebuilt where opening.diskCount != size {
                report.notes.append(
                    "an open of the \(grouped(size))-entry container reported diskCount \(grouped(opening.diskCount))"
                )
            }
            let build = median(indexed.map(\.build))
            let read = median(indexed.map(\.firstRead))
            let openAndRead = median(indexed.map { $0.build + $0.firstRead })
            let loaded = median(indexed.map(\.loaded))
            // The rebuild is done once the index is loaded, not when build() returns.
            let rebuild = median(rebuilt.map(\.loaded))
            let perEntry = median(indexed.map(\.growth)) / Double(size)
            checksum &+= UInt64(indexed.count + rebuilt.count)
            report.lines.append(
                pad(grouped(size), 9) + pad(seconds(build), 21) + pad(seconds(read), 13)
                    + pad(seconds(openAndRead), 14) + pad(seconds(loaded), 15) + pad(seconds(rebuild), 22)
                    + pad(String(format: "%.0f B", perEntry), 15) + pad(seconds(median(readingIndex)), 19)
                    + pad(seconds(median(listing)), 15)
            )
            report.summaryText.append(
                "disk open, \(grouped(size)) entries: open + first read \(seconds(openAndRead)) (index saved), "
                    + "index loaded \(seconds(loaded)), rebuilt \(seconds(rebuild)) (index deleted), \(String(format: "%.0f", perEntry)) B per entry"
            )
            switch size {
            case 100_000:
                report.targets.append(
                    check("open + first read at 100,000 entries ≤ 0.05 s", openAndRead, atMost: 0.05)
                )
                report.targets.append(check("rebuild at 100,000 entries ≤ 1 s", rebuild, atMost: 1))
            case 1_000_000:
                report.targets.append(
                    check("open + first read at 1,000,000 entries ≤ 0.5 s", openAndRead, atMost: 0.5)
                )
                report.targets.append(check("rebuild at 1,000,000 entries ≤ 4 s (warm)", rebuild, atMost: 4))
                report.targets.append(
                    TargetCheck(
                        target: "disk level memory at 1,000,000 entries ≤ 80 B per entry",
                        measured: String(format: "%.0f B", perEntry),
                        holds: perEntry <= 80
                    )
                )
            default: break
            }
        }
        report.notes += [
            "medians over \(context.plan.runs) runs (3 at 1,000,000 entries), after one warm-up open; "
                + "the files are in the page cache (a warm launch)",
            "build() returns before the index is loaded (reads and writes are served meanwhile); "
                + "index loaded = from build() until diskCount, which waits for the index, answered",
            "open, index deleted = from build() until the index rebuilt from the entry files is loaded "
                + "(diskCount answered); its close saves the index again",
            "memory/entry = (VmRSS once the index is loaded − VmRSS before build()) ÷ entries, with an open index",
            "containers kept in \(containersRoot.path); delete the folder to fill them again",
        ]
        report.checksum = checksum
        return report
    }

    /// The container sizes `HOARD_BENCH_DISK_OPEN_SIZES` chooses (entry counts separated by commas,
    /// `100000` or `10000,100000`), to measure without filling or opening the others; `nil` when unset.
    private static var chosenSizes: [Int]? {
        guard let text = ProcessInfo.processInfo.environment["HOARD_BENCH_DISK_OPEN_SIZES"], !text.isEmpty else {
            return nil
        }
        let sizes = text.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }
            .filter { $0 > 0 }
        return sizes.isEmpty ? nil : sizes
    }

    // MARK: - The containers

    /// Where the filled containers are kept between runs.
    static var containersRoot: URL {
        if let root = ProcessInfo.processInfo.environment["HOARD_BENCH_CONTAINERS"], !root.isEmpty {
            return URL(fileURLWithPath: root, isDirectory: true)
        }
        return FileManager.default.temporaryDirectory.appendingPathComponent(
            "hoard-bench-containers",
            isDirectory: true
        )
    }

    /// The key of entry `number`.
    static func key(_ number: Int) -> String { "key-\(number)" }

    /// The cache every fill and open uses: memory level off, room for every entry.
    static func builder(folder: URL, entries: Int) -> CacheBuilder<Data> {
        CacheBuilder<Data>(serializer: DataSerializer())
            .containerName(containerName)
            .directory(folder)
            .maxRamCount(0)
            .maxDiskCount(entries)
    }

    /// Returns the folder of a filled container of `entries` entries, filling it first unless a
    /// previous run finished doing so.
    private static func prepareContainer(entries: Int) async throws -> URL {
        let folder = containersRoot.appendingPathComponent("disk-open-\(entries)", isDirectory: true)
        let marker = folder.appendingPathComponent("filled")
        if let text = try? String(contentsOf: marker, encoding: .utf8), Int(text) == entries {
            return folder
        }
        try? FileManager.default.removeItem(at: folder)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        progress("  filling a container of \(grouped(entries)) entries in \(folder.path) (once)")
        let started = ContinuousClock.now
        let cache = try builder(folder: folder, entries: entries).build()
        for chunk in stride(from: 0, to: entries, by: 10_000) {
            for number in chunk..<min(entries, chunk + 10_000) {
                cache[key(number)] = value(number)
            }
            // Bounds the writes waiting in memory.
            await cache.flush()
        }
        guard cache.diskCount == entries else {
            throw BenchError("the filled container holds \(cache.diskCount) entries, expected \(entries)")
        }
        progress("  filled in \(seconds(started.duration(to: .now).seconds))")
        try Data(String(entries).utf8).write(to: marker)
        return folder
    }

    /// The value of entry `number`: 256 bytes that differ between entries.
    static func value(_ number: Int) -> Data {
        var bytes = [UInt8](repeating: UInt8(truncatingIfNeeded: number), count: valueSize)
        withUnsafeBytes(of: UInt64(number).littleEndian) { bytes.replaceSubrange(0..<8, with: $0) }
        return Data(bytes)
    }

    /// The container's own folder.
    private static func container(in folder: URL) -> URL {
        folder.appendingPathComponent(containerName, isDirectory: true)
    }

    /// Whether `name` is one of the files that make up a container's index.
    private static func isIndexFile(_ name: String) -> Bool {
        name.hasPrefix(".hoard-index") || name.hasPrefix(".hoard-journal")
    }

    private static func deleteIndexFiles(of folder: URL) throws {
        let container = container(in: folder)
        for name in try FileManager.default.contentsOfDirectory(atPath: container.path) where isIndexFile(name) {
            try FileManager.default.removeItem(at: container.appendingPathComponent(name))
        }
    }

    // MARK: - Baselines

    /// Reads every index file's bytes; returns how many there were.
    private static func readIndexFiles(of folder: URL) throws -> Int {
        let container = container(in: folder)
        var total = 0
        for name in try FileManager.default.contentsOfDirectory(atPath: container.path) where isIndexFile(name) {
            let file = open(container.appendingPathComponent(name).path, O_RDONLY | O_CLOEXEC)
            guard file >= 0 else { throw BenchError("cannot open \(name)") }
            defer { close(file) }
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(file, $0.baseAddress, $0.count) }
                guard count > 0 else { break }
                total += count
            }
        }
        return total
    }

    /// Lists the container's folder and every folder in it (names only); returns how many names.
    private static func listFolders(of folder: URL) throws -> Int {
        func list(_ path: String) -> Int {
            guard let stream = opendir(path) else { return 0 }
            defer { closedir(stream) }
            var count = 0
            var subfolders: [String] = []
            while let entry = readdir(stream) {
                let isFolder = entry.pointee.d_type == UInt8(DT_DIR)
                // Read the name in place: the record may be shorter than `dirent`.
                let name = String(
                    cString: (UnsafeRawPointer(entry) + (MemoryLayout<dirent>.offset(of: \dirent.d_name) ?? 0))
                        .assumingMemoryBound(to: CChar.self)
                )
                guard name != ".", name != ".." else { continue }
                count += 1
                if isFolder { subfolders.append(name) }
            }
            return count + subfolders.reduce(0) { $0 + list(path + "/" + $1) }
        }
        return list(container(in: folder).path)
    }

    // MARK: - The opening child

    /// Opens the container in a child process and returns what it measured.
    private static func measureOpening(_ folder: URL, entries: Int, mode: Mode) async throws -> Opening {
        let (status, text) = try await runThisBinary([childArgument, mode.rawValue, folder.path, String(entries)])
        let numbers = text.split(whereSeparator: \.isWhitespace).compactMap { Double($0) }
        guard status == 0, numbers.count == 5 else {
            throw BenchError("disk-open child (\(mode.rawValue), \(entries)) failed (status \(status)): \(text)")
        }
        return Opening(
            build: numbers[0],
            firstRead: numbers[1],
            loaded: numbers[2],
            growth: numbers[3],
            diskCount: Int(numbers[4])
        )
    }

    /// The child's side: opens the container, reads one key, waits for the index, prints
    /// `build-seconds first-read-seconds loaded-seconds growth-bytes disk-count`; returns the exit code.
    static func runChild(_ arguments: [String]) -> Int32 {
        guard arguments.count == 3, Mode(rawValue: arguments[0]) != nil, let entries = Int(arguments[2]),
            entries > 0
        else {
            progress("usage: hoard-bench \(childArgument) <indexed|rebuild> <folder> <entries>")
            return 2
        }
        let folder = URL(fileURLWithPath: arguments[1], isDirectory: true)
        let number = entries / 2
        let before = residentBytes()
        let clock = ContinuousClock()
        let start = clock.now
        let cache: Cache<Data>
        do {
            cache = try builder(folder: folder, entries: entries).build()
        } catch {
            progress("cannot open the container: \(error)")
            return 1
        }
        let built = clock.now
        let read = cache[key(number)]
        let readDone = clock.now
        let count = cache.diskCount
        let loaded = clock.now
        let growth = withExtendedLifetime(cache) { residentBytes() } - before
        guard read == value(number) else {
            progress("the first read of \(key(number)) returned \(read.map { "\($0.count) bytes" } ?? "nothing")")
            return 1
        }
        print(
            start.duration(to: built).seconds,
            built.duration(to: readDone).seconds,
            start.duration(to: loaded).seconds,
            growth,
            count
        )
        return 0
    }

    private static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        let half = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[half] : (sorted[half - 1] + sorted[half]) / 2
    }

    private static func seconds(_ value: Double) -> String {
        value < 0.1 ? String(format: "%.1f ms", value * 1_000) : String(format: "%.2f s", value)
    }

    private static func check(_ target: String, _ measured: Double, atMost limit: Double) -> TargetCheck {
        TargetCheck(target: target, measured: seconds(measured), holds: measured <= limit)
    }
}
