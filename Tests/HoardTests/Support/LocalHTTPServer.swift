import Foundation
import HoardTestSupport

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A tiny HTTP/1.1 server on 127.0.0.1 for tests: it answers `GET` requests from a table of routes.
///
/// It listens on a port the system picks (``port``), accepts on a plain background thread and answers
/// each connection on its own thread, then closes it. A route with a ``Route/gate`` waits until the
/// gate opens before answering, so that a test can cancel a request the server holds. The server
/// stops in `deinit`, which also opens every gate so that no thread is left waiting.
final class LocalHTTPServer: Sendable {
    /// What the server answers for one path.
    struct Route: Sendable {
        var status: Int
        var body: Data
        var gate: ThreadGate?

        init(status: Int, body: Data = Data(), gate: ThreadGate? = nil) {
            self.status = status
            self.body = body
            self.gate = gate
        }
    }

    /// An error from a socket call made while starting the server.
    struct SocketError: Error {
        let operation: String
        let errorNumber: Int32
    }

    /// The port the server listens on.
    let port: UInt16
    private let listener: Listener

    /// Starts a server answering `routes`; an unknown path gets a 404 with an empty body.
    init(routes: [String: Route]) throws {
        let descriptor = try Self.boundSocket()
        guard listen(descriptor, 16) == 0 else {
            let error = SocketError(operation: "listen", errorNumber: errno)
            close(descriptor)
            throw error
        }
        port = try Self.port(of: descriptor)
        listener = Listener(descriptor: descriptor, routes: routes)
        let listener = self.listener
        Thread.detachNewThread { listener.acceptLoop() }
    }

    deinit {
        listener.stop()
    }

    /// The URL of `path` on this server, such as `http://127.0.0.1:54321/ok`.
    func url(_ path: String) -> URL {
        URL(string: "http://127.0.0.1:\(port)\(path)")!
    }

    /// The paths of the requests received so far, in arrival order.
    var receivedPaths: [String] { listener.receivedPaths }

    /// A port on 127.0.0.1 that nothing listens on, for a test's server or for a test about a
    /// port nobody serves: free when checked, and never given twice in this process.
    ///
    /// It lies below the system's ephemeral range, so no socket the system numbers (a client's
    /// source port, a fake server on port 0) takes it: once a test kills its server, nobody else
    /// answers on that port by chance.
    static func closedPort() throws -> UInt16 {
        for _ in 0..<PortPicker.count {
            let candidate = PortPicker.next()
            do {
                close(try boundSocket(port: candidate))
                return candidate
            } catch let error as SocketError where error.errorNumber == EADDRINUSE || error.errorNumber == EACCES {
                continue
            }
        }
        throw SocketError(operation: "bind", errorNumber: EADDRINUSE)
    }

    /// A TCP socket bound to 127.0.0.1 on `port`, or on a port the system picks.
    static func boundSocket(port: UInt16 = 0) throws -> Int32 {
        #if canImport(Darwin)
        let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #else
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #endif
        guard descriptor >= 0 else { throw SocketError(operation: "socket", errorNumber: errno) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let status = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bind(descriptor, socketAddress, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard status == 0 else {
            let error = SocketError(operation: "bind", errorNumber: errno)
            close(descriptor)
            throw error
        }
        return descriptor
    }

    static func port(of descriptor: Int32) throws -> UInt16 {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let status = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                getsockname(descriptor, socketAddress, &length)
            }
        }
        guard status == 0 else { throw SocketError(operation: "getsockname", errorNumber: errno) }
        return UInt16(bigEndian: address.sin_port)
    }
}

/// The listening socket and the state the server's threads share.
private final class Listener: @unchecked Sendable {
    // Safe because `descriptor` and `routes` never change, and `isStopped` and `paths` are only
    // touched while holding `lock`.
    private let descriptor: Int32
    private let routes: [String: LocalHTTPServer.Route]
    private let lock = NSLock()
    private var isStopped = false
    private var paths: [String] = []

    /// The most bytes of a request the server reads; requests in these tests are far smaller.
    private static let maximumRequestSize = 16 * 1024

    init(descriptor: Int32, routes: [String: LocalHTTPServer.Route]) {
        self.descriptor = descriptor
        self.routes = routes
    }

    var receivedPaths: [String] { lock.withLock { paths } }

    /// Accepts connections until ``stop()`` shuts the listening socket down.
    func acceptLoop() {
        while !lock.withLock({ isStopped }) {
            let connection = accept(descriptor, nil, nil)
            guard connection >= 0 else {
                if errno == EINTR { continue }
                return  // The socket was shut down, or cannot accept any more.
            }
            Thread.detachNewThread { self.answer(connection) }
        }
    }

    /// Stops accepting, closes the listening socket and opens every gate.
    func stop() {
        lock.withLock { isStopped = true }
        shutdown(descriptor, Int32(SHUT_RDWR))
        close(descriptor)
        for route in routes.values { route.gate?.open() }
    }

    private func answer(_ connection: Int32) {
        defer { close(connection) }
        guard let path = readRequestPath(connection) else { return }
        lock.withLock { paths.append(path) }
        let route = routes[path] ?? LocalHTTPServer.Route(status: 404)
        route.gate?.wait()
        let head =
            "HTTP/1.1 \(route.status) \(route.status < 400 ? "OK" : "Error")\r\n"
            + "Content-Length: \(route.body.count)\r\nConnection: close\r\n\r\n"
        write(connection, Data(head.utf8) + route.body)
    }

    /// Reads up to the end of the request's head and returns the path of its request line.
    private func readRequestPath(_ connection: Int32) -> String? {
        var received = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        let endOfHead = Data("\r\n\r\n".utf8)
        while received.count < Self.maximumRequestSize, received.range(of: endOfHead) == nil {
            let count = recv(connection, &buffer, buffer.count, 0)
            guard count > 0 else { return nil }
            received.append(contentsOf: buffer[0..<count])
        }
        guard let head = String(data: received, encoding: .utf8),
            let requestLine = head.split(separator: "\r\n").first
        else { return nil }
        let parts = requestLine.split(separator: " ")
        guard parts.count == 3 else { return nil }
        return String(parts[1])
    }

    /// Writes all of `data`, giving up when the peer has gone; never raises `SIGPIPE`.
    private func write(_ connection: Int32, _ data: Data) {
        #if canImport(Darwin)
        var one: Int32 = 1
        setsockopt(connection, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        let flags: Int32 = 0
        #else
        let flags = Int32(MSG_NOSIGNAL)
        #endif
        data.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let sent = send(connection, bytes.baseAddress! + offset, bytes.count - offset, flags)
                guard sent > 0 else { return }
                offset += sent
            }
        }
    }
}

/// Gives out the ports `closedPort()` tries, in turn from a random start, each once a process.
private enum PortPicker {
    /// The lowest port the system gives out by itself (Linux says it; Darwin's range starts higher).
    private static let ephemeralStart: Int = {
        #if os(Linux)
        if let range = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8),
            let low = range.split(whereSeparator: \.isWhitespace).first.flatMap({ Int($0) })
        {
            return low
        }
        #endif
        return 32768
    }()

    /// The ports given out: `HOARD_TEST_PORTS` (`low-high`, both included) when set, so that runs
    /// sharing a machine keep their servers apart; else the 12 000 below the ephemeral range, above
    /// the well-known ones.
    private static let range: Range<Int> = {
        if let text = ProcessInfo.processInfo.environment["HOARD_TEST_PORTS"] {
            let bounds = text.split(separator: "-").compactMap { Int($0) }
            if bounds.count == 2, 1024 <= bounds[0], bounds[0] <= bounds[1], bounds[1] <= 65_535 {
                return bounds[0]..<(bounds[1] + 1)
            }
        }
        return max(1024, ephemeralStart - 12000)..<max(1025, ephemeralStart)
    }()
    static var count: Int { range.count }
    private static let lock = NSLock()
    // Safe because it is only touched while holding `lock`.
    nonisolated(unsafe) private static var given = Int.random(in: 0..<12000)

    static func next() -> UInt16 {
        let index = lock.withLock {
            defer { given += 1 }
            return given
        }
        return UInt16(range.lowerBound + index % range.count)
    }
}
