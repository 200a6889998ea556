import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#elseif canImport(Musl)
import Musl
#endif

#if canImport(Glibc)
private let sendSignal = Glibc.kill
#elseif canImport(Darwin)
private let sendSignal = Darwin.kill
#elseif canImport(Musl)
private let sendSignal = Musl.kill
#endif

/// A running `hoard-test-worker` child process, with a pipe to its standard input and one from its
/// standard output.
///
/// Every method that waits (`readLine()`, `wait()`) blocks its thread: call them from
/// ``onPlainThread(_:)``, never from a task on the cooperative pool.
final class WorkerProcess: @unchecked Sendable {
    // Safe because the mutable buffer is only used by the one plain thread that reads the process's
    // output; `pid` and the descriptors are immutable, and `kill`/`closeInput` are plain system calls.
    let pid: pid_t
    private let output: Int32
    private let input: Int32
    private var buffer: [UInt8] = []
    private var isAtEnd = false
    private var isInputClosed = false

    /// The worker executable: `HOARD_TEST_WORKER`, or `hoard-test-worker` in the build products folder
    /// that holds the test bundle (SwiftPM and Xcode build every executable target the tests need).
    ///
    /// Looked for next to the test bundle (`.xctest`) and above it, never from the test runner's own
    /// path: in Xcode the runner is Xcode's `xctest`, far from the build products.
    static let executable: String? = {
        if let path = ProcessInfo.processInfo.environment["HOARD_TEST_WORKER"] { return path }
        for start in testBundleLocations {
            var folder = URL(fileURLWithPath: start).deletingLastPathComponent()
            for _ in 0..<5 {
                let candidate = folder.appendingPathComponent("hoard-test-worker").path
                if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
                folder = folder.deletingLastPathComponent()
            }
        }
        return nil
    }()

    private static let spawning = NSLock()

    /// Where the tests' code lives: the `.xctest` bundle (Apple platforms), then this process's
    /// executable (on Linux, the test bundle is the executable).
    private static var testBundleLocations: [String] {
        var locations = Bundle.allBundles.map(\.bundlePath).filter { $0.hasSuffix(".xctest") }
        #if os(Linux)
        if let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            locations.append(path)
        }
        #endif
        locations.append(Bundle.main.executablePath ?? CommandLine.arguments[0])
        return locations
    }

    /// The worker, or a recorded issue saying how to build it.
    static func requireExecutable(sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        try #require(
            executable,
            "hoard-test-worker was not found next to the test bundle; build it (swift build) or set HOARD_TEST_WORKER",
            sourceLocation: sourceLocation
        )
    }

    /// Starts the worker with `arguments`; with `asUser`, under `setpriv` as that unprivileged user.
    ///
    /// - Parameters:
    ///   - arguments: The worker's arguments, mode first.
    ///   - user: The user to run as, or `nil` for this process's user.
    ///   - executable: A copy of the worker to run instead of the one in the build folder (which
    ///     another user may not be allowed to reach).
    /// - Throws: The `POSIXError` of a failed `pipe` or `posix_spawn`, or the issue of a missing worker.
    init(_ arguments: [String], asUser user: String? = nil, executable: String? = nil) throws {
        let worker = try executable ?? Self.requireExecutable()
        var command = [worker] + arguments
        if let user {
            command = ["/usr/bin/setpriv", "--reuid=\(user)", "--regid=nogroup", "--clear-groups"] + command
        }
        var toChild: [Int32] = [0, 0]
        var fromChild: [Int32] = [0, 0]
        // Close-on-exec, so that a worker started by a parallel test never inherits these pipes.
        // Pipes are made close-on-exec, so that a worker started by a parallel test never inherits
        // them; one spawn at a time, so that none starts between a `pipe` and its `fcntl`.
        Self.spawning.lock()
        defer { Self.spawning.unlock() }
        guard Self.makePipe(&toChild), Self.makePipe(&fromChild) else {
            throw POSIXError(.init(rawValue: errno) ?? .EIO)
        }
        // An opaque pointer on Apple platforms, a struct elsewhere; `init` fills either in.
        #if canImport(Darwin)
        var actions: posix_spawn_file_actions_t?
        #else
        var actions = posix_spawn_file_actions_t()
        #endif
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
        let argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        // The test's environment (HOARD_*, sanitizer options), built portably: `environ` is not
        // imported on every platform.
        let environment = ProcessInfo.processInfo.environment.map { "\($0.key)=\($0.value)" }
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
        defer { for pointer in envp { free(pointer) } }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, command[0], &actions, nil, argv, envp)
        close(toChild[0])
        close(fromChild[1])
        guard status == 0 else {
            close(toChild[1])
            close(fromChild[0])
            throw POSIXError(.init(rawValue: status) ?? .EIO)
        }
        self.pid = pid
        input = toChild[1]
        output = fromChild[0]
    }

    /// Copies the worker to `path` (mode 0755), for a user who cannot reach the build folder.
    ///
    /// The copy is made while no worker is being started: a process forked meanwhile would inherit
    /// the copy's open descriptor, and running the copy would then fail with "text file busy".
    static func copyExecutable(to path: String) throws {
        let worker = try requireExecutable()
        spawning.lock()
        defer { spawning.unlock() }
        try FileManager.default.copyItem(atPath: worker, toPath: path)
        guard chmod(path, 0o755) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
    }

    private static func makePipe(_ descriptors: inout [Int32]) -> Bool {
        guard pipe(&descriptors) == 0 else { return false }
        for descriptor in descriptors { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        return true
    }

    deinit {
        if !isInputClosed { close(input) }
        close(output)
    }

    /// The next line the worker wrote, without its newline; `nil` once it closed its output.
    func readLine() -> String? {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            if isAtEnd { return nil }
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let count = chunk.withUnsafeMutableBytes { read(output, $0.baseAddress, $0.count) }
            if count > 0 {
                buffer.append(contentsOf: chunk[..<count])
            } else if count == 0 || errno != EINTR {
                // A partial last line (cut by a kill) is not a record.
                isAtEnd = true
            }
        }
    }

    /// Every remaining line, until the worker closes its output.
    func readAllLines() -> [String] {
        var lines: [String] = []
        while let line = readLine() { lines.append(line) }
        return lines
    }

    /// Sends `SIGKILL`.
    func kill() {
        _ = sendSignal(pid, SIGKILL)
    }

    /// Stops the worker (`SIGSTOP`) until ``resume()``: its sockets stay open and go silent.
    func pause() {
        _ = sendSignal(pid, SIGSTOP)
    }

    /// Continues the worker after ``pause()`` (`SIGCONT`).
    func resume() {
        _ = sendSignal(pid, SIGCONT)
    }

    /// Writes `line` and a newline to the worker's standard input.
    func send(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        var done = 0
        while done < bytes.count {
            let written = bytes[done...].withUnsafeBytes { write(input, $0.baseAddress, $0.count) }
            guard written > 0 || errno == EINTR else { return }
            done += max(0, written)
        }
    }

    /// Ends the worker's standard input.
    func closeInput() {
        guard !isInputClosed else { return }
        isInputClosed = true
        close(input)
    }

    /// How a worker ended.
    enum Ending: Equatable, CustomStringConvertible {
        case exited(Int32)
        case killed(Int32)

        var description: String {
            switch self {
            case .exited(let status): "exited with status \(status)"
            case .killed(let signal): "killed by signal \(signal)"
            }
        }
    }

    /// Waits for the worker to end.
    func wait() -> Ending {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        // The macros WIFEXITED and friends are not imported into Swift.
        let signal = status & 0x7f
        return signal == 0 ? .exited((status >> 8) & 0xff) : .killed(signal)
    }

    /// Runs the worker to its end on a plain thread; returns its output lines and how it ended.
    static func run(
        _ arguments: [String],
        asUser user: String? = nil,
        executable: String? = nil
    ) async throws -> (
        lines: [String], ending: Ending
    ) {
        let process = try WorkerProcess(arguments, asUser: user, executable: executable)
        process.closeInput()
        return await onPlainThread { (process.readAllLines(), process.wait()) }
    }
}
