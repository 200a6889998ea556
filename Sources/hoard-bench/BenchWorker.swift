import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

/// A running `hoard-test-worker` child, with a pipe to its standard input and one from its standard
/// output, for the scenarios that measure across processes.
///
/// `readLine()` blocks its thread: call it through ``onPlainThread(_:)``, never from a task on the
/// cooperative pool, whose few threads the caches being measured need.
final class BenchWorker: @unchecked Sendable {
    // Safe because `buffer` and `isAtEnd` are only used by `readLine()`, which one caller at a time
    // runs (the scenario waits for each line before asking for the next); the rest is immutable.
    private let process: Process
    private let input: FileHandle
    private let output: Int32
    private var buffer: [UInt8] = []
    private var isAtEnd = false

    /// `hoard-test-worker` next to this executable, or `nil` when it was not built.
    static let executable: URL? = {
        let own = Bundle.main.executableURL ?? URL(fileURLWithPath: CommandLine.arguments[0])
        let candidate = own.resolvingSymlinksInPath().deletingLastPathComponent()
            .appendingPathComponent("hoard-test-worker")
        return FileManager.default.isExecutableFile(atPath: candidate.path) ? candidate : nil
    }()

    /// Starts the worker with `arguments`, mode first.
    ///
    /// - Throws: What `Process.run()` throws.
    init(executable: URL, _ arguments: [String]) throws {
        process = Process()
        process.executableURL = executable
        process.arguments = arguments
        let toChild = Pipe()
        let fromChild = Pipe()
        process.standardInput = toChild
        process.standardOutput = fromChild
        process.standardError = FileHandle.nullDevice
        // A write to a worker that died would otherwise end this process.
        _ = signal(SIGPIPE, SIG_IGN)
        try process.run()
        input = toChild.fileHandleForWriting
        output = fromChild.fileHandleForReading.fileDescriptor
    }

    /// The next line the worker wrote, without its newline; `nil` once it closed its output or when
    /// it wrote none for `seconds`.
    func readLine(seconds: Int32 = 30) -> String? {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            if isAtEnd { return nil }
            var ready = pollfd(fd: output, events: Int16(POLLIN), revents: 0)
            let status = poll(&ready, 1, seconds * 1_000)
            if status == 0 { return nil }
            if status < 0 && errno == EINTR { continue }
            var chunk = [UInt8](repeating: 0, count: 4_096)
            let count = chunk.withUnsafeMutableBytes { read(output, $0.baseAddress, $0.count) }
            if count > 0 {
                buffer.append(contentsOf: chunk[..<count])
            } else if count == 0 || errno != EINTR {
                isAtEnd = true
            }
        }
    }

    /// Writes `line` and a newline to the worker's standard input.
    func send(_ line: String) {
        try? input.write(contentsOf: Data((line + "\n").utf8))
    }

    /// Ends the worker's input, which ends it, and waits for it (killing it after 5 s).
    func finish() {
        try? input.close()
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

/// Runs `body` on a new plain thread and returns its result, without blocking the cooperative pool.
func onPlainThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: body()) }
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds: one clock for every process of the machine.
func monotonicNanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}
