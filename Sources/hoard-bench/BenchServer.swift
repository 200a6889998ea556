import Foundation
import HoardRedis

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#endif

/// The server a scenario measures: `HOARD_REDIS_URL`'s, or a `redis-server` it starts and stops.
///
/// A server it started can also be made to fail, for the outage measurements: killed and started
/// again on the same port (``kill()``, ``restart()``), or stopped and continued (``pause()``,
/// ``resume()``).
final class BenchServer {
    let port: Int
    /// The running server, when this started it.
    private(set) var process: Process?
    private let executable: URL?
    private let folder: URL?
    var url: String { "redis://127.0.0.1:\(port)" }
    /// Whether this started the server, and so can make it fail.
    var isOwn: Bool { executable != nil }

    struct Unavailable: Error, CustomStringConvertible {
        let description: String
    }

    /// More `redis-server` arguments, for a server this starts.
    private let extraArguments: [String]

    private init(port: Int, executable: URL?, folder: URL?, extraArguments: [String] = []) {
        self.port = port
        self.executable = executable
        self.folder = folder
        self.extraArguments = extraArguments
    }

    /// `HOARD_REDIS_URL`'s server, unless `own`, else a `redis-server` started on a free port.
    ///
    /// - Parameter own: Whether to start a server even when `HOARD_REDIS_URL` names one.
    /// - Returns: The running server.
    /// - Throws: ``Unavailable`` when there is no `redis-server` or it does not answer within 5 s.
    static func start(own: Bool = false) async throws -> BenchServer {
        try await start(own: own, extraArguments: [])
    }

    /// A `redis-server` started with `extraArguments` in `folder` (TLS ports, a socket), or
    /// `HOARD_REDIS_URL`'s server unless `own`.
    static func start(own: Bool, extraArguments: [String], in folder: URL? = nil) async throws -> BenchServer {
        if !own, let url = ProcessInfo.processInfo.environment["HOARD_REDIS_URL"],
            let port = URLComponents(string: url)?.port
        {
            return BenchServer(port: port, executable: nil, folder: nil)
        }
        guard let executable = RedisBench.onPath("redis-server") else {
            throw Unavailable(description: "no redis-server")
        }
        let folder =
            folder ?? FileManager.default.temporaryDirectory.appendingPathComponent("hoard-bench-redis-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let server = BenchServer(
            port: try freePort(),
            executable: executable,
            folder: folder,
            extraArguments: extraArguments
        )
        try await server.restart()
        return server
    }

    /// Starts the server this started (after ``kill()``) again, on the same port, with no data, and
    /// waits until it answers.
    ///
    /// - Throws: ``Unavailable`` when it does not answer within 5 s; what `Process.run()` throws.
    func restart() async throws {
        guard let executable, let folder else { return }
        let process = Process()
        process.executableURL = executable
        process.arguments =
            [
                "--port", String(port), "--bind", "127.0.0.1", "--dir", folder.path, "--save", "", "--appendonly", "no",
                "--daemonize", "no",
            ] + extraArguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.process = process
        guard await answers(within: .seconds(5)) else {
            stop()
            throw Unavailable(description: "redis-server did not answer within 5 s")
        }
    }

    /// Whether the server answers a `PING` within `limit`, asking every 20 ms.
    func answers(within limit: Duration) async -> Bool {
        guard let probe = try? RedisCacheLevel(url: url, namespace: "probe", poolSize: 1) else { return false }
        let end = ContinuousClock.now + limit
        while ContinuousClock.now < end {
            if (try? await probe.ping()) != nil { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    /// Kills the server this started with `SIGKILL`: it keeps no data, and its port is free for
    /// ``restart()``.
    ///
    /// With `SIGKILL`: a child started by `Process` inherits the signals this process's threads
    /// block, `SIGTERM` among them, so `terminate()` would leave it running.
    func kill() {
        guard let process, process.isRunning else { return }
        _ = signal(process, SIGKILL)
        process.waitUntilExit()
    }

    /// Stops the server this started (`SIGSTOP`): its connections stay open and go silent.
    func pause() {
        guard let process else { return }
        _ = signal(process, SIGSTOP)
    }

    /// Continues the server after ``pause()`` (`SIGCONT`).
    func resume() {
        guard let process else { return }
        _ = signal(process, SIGCONT)
    }

    /// Kills the server this started and removes its folder.
    func stop() {
        kill()
        if let folder { try? FileManager.default.removeItem(at: folder) }
    }

    private func signal(_ process: Process, _ signal: Int32) -> Int32 {
        #if canImport(Darwin)
        Darwin.kill(process.processIdentifier, signal)
        #else
        Glibc.kill(process.processIdentifier, signal)
        #endif
    }

    static func freePort() throws -> Int {
        #if canImport(Darwin)
        let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #else
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #endif
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let status = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                bind(descriptor, raw, length) == 0 ? getsockname(descriptor, raw, &length) : -1
            }
        }
        guard status == 0 else { throw Unavailable(description: "no free port (errno \(errno))") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
