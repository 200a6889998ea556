import Foundation
import Testing

@testable import Hoard

/// A `redis-server` process for the tests, on 127.0.0.1 at a free port, with a temporary folder.
///
/// ``shared`` is the server most tests use: the one `HOARD_REDIS_URL` names (CI starts it), else one
/// this process starts from `redis-server` on the PATH. Tests that need their own (with a password,
/// ACL users, `HELLO` renamed away, or to kill it) call ``start(configuration:)``. When no server
/// can be had, the tests are disabled with the reason in ``unavailableReason``, unless
/// `HOARD_REQUIRE_REDIS=1`, which makes them run and fail.
final class RedisTestServer: Sendable {
    /// The port it listens on.
    let port: UInt16
    /// `redis://127.0.0.1:<port>`.
    var url: String { "redis://127.0.0.1:\(port)" }
    private let process: WorkerProcess?
    private let folder: TemporaryDirectory?
    /// Whether the server was killed and reaped (its pid may be another process's by now).
    private let isGone = Locked(false)

    private init(port: UInt16, process: WorkerProcess?, folder: TemporaryDirectory?) {
        self.port = port
        self.process = process
        self.folder = folder
    }

    deinit { stop() }

    /// Ends the server with SIGKILL, as a crash would, and waits until it is gone.
    func kill() {
        guard let process else { return }
        isGone.withLock { isGone in
            guard !isGone else { return }
            isGone = true
            process.kill()
            _ = process.wait()
        }
    }

    /// Ends the server and waits until it is gone.
    func stop() {
        resume()
        kill()
    }

    /// Stops the server (`SIGSTOP`), as a partition would for its clients: connections stay open
    /// and nothing answers, until ``resume()``.
    func pause() { process?.pause() }

    /// Continues the server after ``pause()``.
    func resume() { process?.resume() }

    /// Whether tests that need a server should run: one is there, or CI requires one.
    static var isEnabled: Bool { shared != nil || isRequired }
    static var isRequired: Bool { ProcessInfo.processInfo.environment["HOARD_REQUIRE_REDIS"] == "1" }
    static let unavailableReason: Comment =
        "no Redis server: set HOARD_REDIS_URL or put redis-server on the PATH (HOARD_REQUIRE_REDIS=1 fails instead)"

    /// The server most tests share, or `nil` when there is none.
    static let shared: RedisTestServer? = {
        if let url = ProcessInfo.processInfo.environment["HOARD_REDIS_URL"],
            let port = URLComponents(string: url)?.port.flatMap({ UInt16(exactly: $0) })
        {
            return RedisTestServer(port: port, process: nil, folder: nil)
        }
        return try? start()
    }()

    /// The shared server, or a test failure when there is none.
    static func required() throws -> RedisTestServer {
        try #require(shared, unavailableReason)
    }

    /// `redis-server` on the PATH, if any.
    static var executable: URL? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/usr/local/bin"
        for folder in path.split(separator: ":") {
            let candidate = URL(fileURLWithPath: String(folder)).appendingPathComponent("redis-server")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        return nil
    }

    /// Starts a server of its own with extra `configuration` lines (a config file), on `port` or a
    /// free one, and waits until it accepts connections.
    ///
    /// With `tls`, the port is a TLS port (`tls-port`; the configuration names the certificates)
    /// and the server has no plain TCP port. With `sentinel`, it runs as a Sentinel (`--sentinel`;
    /// the configuration says what it monitors).
    static func start(
        configuration: [String] = [],
        port: UInt16? = nil,
        tls: Bool = false,
        sentinel: Bool = false
    ) throws -> RedisTestServer {
        guard port == nil else { return try start(configuration, port: port, tls: tls, sentinel: sentinel) }
        // A free port can be taken between the look and the server's bind (by another test's
        // server, or a client's ephemeral port): then another port is tried.
        var attempt = 1
        while true {
            do {
                return try start(configuration, port: nil, tls: tls, sentinel: sentinel)
            } catch let error as TestServerError
                where error.description.contains("Address already in use") && attempt < 5
            {
                attempt += 1
            }
        }
    }

    private static func start(
        _ configuration: [String],
        port: UInt16?,
        tls: Bool,
        sentinel: Bool
    ) throws -> RedisTestServer {
        guard let executable else { throw TestServerError("redis-server is not on the PATH") }
        let folder = TemporaryDirectory()
        let port = try port ?? LocalHTTPServer.closedPort()
        let file = folder.url.appendingPathComponent("redis.conf")
        try (configuration.joined(separator: "\n") + "\n").write(to: file, atomically: true, encoding: .utf8)
        // Spawned as the test worker is (`posix_spawn`), not by Foundation's `Process`, whose `run()`
        // reads each `/proc/self/fd` entry's whole `d_name` and so past its buffer, which
        // AddressSanitizer reports when the last entry ends the buffer.
        let process = try WorkerProcess(
            [
                file.path, tls ? "--tls-port" : "--port", String(port), "--port", tls ? "0" : String(port), "--bind",
                "127.0.0.1", "--dir", folder.url.path, "--save", "",
                "--appendonly", "no", "--daemonize", "no", "--loglevel", "notice",
            ] + (sentinel ? ["--sentinel"] : []),
            executable: executable.path
        )
        killedAtExit.add(process.pid)
        let server = RedisTestServer(port: port, process: process, folder: folder)
        // Waits on the condition itself: the log line the server prints once it accepts connections.
        var log: [String] = []
        let ready = sentinel ? "Sentinel ID is" : "Ready to accept connections"
        while !(log.last?.contains(ready) ?? false) {
            guard let line = process.readLine() else {
                throw TestServerError("redis-server exited: \(log.joined(separator: "\n"))")
            }
            log.append(line)
        }
        // Keep draining its output so that it never blocks on a full pipe.
        Thread.detachNewThread {
            while process.readLine() != nil {}
        }
        return server
    }
}

/// Every server this process started, killed when it exits: the shared one lives as long as the
/// process, and a test's own may outlive its test when Swift keeps the value longer than its scope.
private let killedAtExit = ServersKilledAtExit()

private final class ServersKilledAtExit: @unchecked Sendable {
    // Safe because `identifiers` is only touched while holding `lock`.
    private let lock = NSLock()
    private var identifiers: [Int32] = []

    init() {
        atexit { killedAtExit.killAll() }
    }

    func add(_ identifier: Int32) { lock.withLock { identifiers.append(identifier) } }

    func killAll() {
        for identifier in lock.withLock({ identifiers }) { _ = kill(identifier, SIGKILL) }
    }
}

struct TestServerError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
