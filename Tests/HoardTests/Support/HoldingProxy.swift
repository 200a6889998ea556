import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A TCP proxy on 127.0.0.1 in front of a server on another local port, that can hold back the
/// replies on the connection that sends a given request, until the test lets them go, and can make
/// the server look unreachable.
///
/// For the tests of a read whose reply is in flight while something else happens. Each connection
/// is served by two plain threads, one per direction, with blocking sockets.
final class HoldingProxy: @unchecked Sendable {
    // Safe because `pattern`, `blocked`, `pairs`, `heldCount`, `isRefusing` and `isStopped` are only
    // touched while holding `lock`; `listener` and `upstreamPort` never change.
    let port: UInt16
    private let upstreamPort: UInt16
    private let listener: Int32
    private let lock = NSLock()
    private var pattern: [UInt8]?
    private var blocked: [[UInt8]] = []
    private var pairs: [Pair] = []
    private var heldCount = 0
    private var isRefusing = false
    private var isStopped = false

    /// One client connection and its connection to the server.
    private final class Pair: @unchecked Sendable {
        // Safe because `held`, `heldFor` and `isHolding` are only touched while holding `lock`.
        let client: Int32
        let server: Int32
        let lock = NSLock()
        var isHolding = false
        /// The request text whose match began the hold.
        var heldFor: [UInt8] = []
        var held: [UInt8] = []

        init(client: Int32, server: Int32) {
            self.client = client
            self.server = server
        }
    }

    /// Starts a proxy to the server at 127.0.0.1:`upstreamPort`.
    init(upstreamPort: UInt16) throws {
        self.upstreamPort = upstreamPort
        listener = try LocalHTTPServer.boundSocket()
        guard listen(listener, 16) == 0 else {
            throw LocalHTTPServer.SocketError(operation: "listen", errorNumber: errno)
        }
        port = try LocalHTTPServer.port(of: listener)
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    deinit {
        lock.withLock { isStopped = true }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for pair in lock.withLock({ pairs }) {
            shutdown(pair.client, Int32(SHUT_RDWR))
            shutdown(pair.server, Int32(SHUT_RDWR))
        }
    }

    /// Holds every reply on the next connection whose request contains `text`, from that request on.
    func holdReplies(toRequestContaining text: String) { lock.withLock { pattern = Array(text.utf8) } }

    /// Cuts every connection that sends a request containing `text` (`nil`: none), as it sends it.
    func cut(connectionsSending text: String?) { cut(connectionsSendingAnyOf: text.map { [$0] } ?? []) }

    /// Cuts every connection that sends a request containing any of `texts` (none: no connection),
    /// as it sends it.
    func cut(connectionsSendingAnyOf texts: [String]) { lock.withLock { blocked = texts.map { Array($0.utf8) } } }

    /// Closes every connection, and each new one as soon as it is accepted, until called with `false`:
    /// to its clients, the server is down.
    func refuse(_ refusing: Bool) {
        let closing = lock.withLock { () -> [Pair] in
            isRefusing = refusing
            return refusing ? pairs : []
        }
        for pair in closing {
            shutdown(pair.client, Int32(SHUT_RDWR))
            shutdown(pair.server, Int32(SHUT_RDWR))
        }
    }

    /// How many chunks of replies were held since the last ``release()`` (a partial release keeps
    /// counting them).
    var held: Int { lock.withLock { heldCount } }

    /// How many client connections it has forwarded so far.
    var connectionCount: Int { lock.withLock { pairs.count } }

    /// Sends what was held, and stops holding.
    func release() {
        let holding = lock.withLock { () -> [Pair] in
            heldCount = 0
            pattern = nil
            return pairs
        }
        for pair in holding {
            pair.lock.withLock {
                Self.write(pair.held, to: pair.client)
                pair.held = []
                pair.isHolding = false
            }
        }
    }

    /// Sends what was held on the connections whose hold began with a request containing `text`,
    /// and stops holding those; the others keep holding.
    func release(repliesToRequestContaining text: String) {
        let pattern = Array(text.utf8)
        for pair in lock.withLock({ pairs }) {
            pair.lock.withLock {
                guard pair.isHolding, pair.heldFor == pattern else { return }
                Self.write(pair.held, to: pair.client)
                pair.held = []
                pair.isHolding = false
            }
        }
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            if lock.withLock({ isRefusing }) {
                close(client)
                continue
            }
            guard let server = try? connectUpstream() else {
                close(client)
                continue
            }
            let pair = Pair(client: client, server: server)
            let isStopped = lock.withLock { () -> Bool in
                pairs.append(pair)
                return self.isStopped
            }
            if isStopped { return }
            Thread.detachNewThread { [self] in forwardRequests(pair) }
            Thread.detachNewThread { [self] in forwardReplies(pair) }
        }
    }

    private func connectUpstream() throws -> Int32 {
        let descriptor = try LocalHTTPServer.boundSocket()
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = upstreamPort.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let status = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard status == 0 else {
            close(descriptor)
            throw LocalHTTPServer.SocketError(operation: "connect", errorNumber: errno)
        }
        return descriptor
    }

    private func forwardRequests(_ pair: Pair) {
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(pair.client, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            let chunk = Array(buffer[..<count])
            let (holds, cuts) = lock.withLock { () -> ([UInt8]?, Bool) in
                if blocked.contains(where: { Self.contains(chunk, $0) }) { return (nil, true) }
                guard let pattern, Self.contains(chunk, pattern) else { return (nil, false) }
                self.pattern = nil
                return (pattern, false)
            }
            if cuts { break }
            if let holds {
                pair.lock.withLock {
                    pair.isHolding = true
                    pair.heldFor = holds
                }
            }
            Self.write(chunk, to: pair.server)
        }
        shutdown(pair.server, Int32(SHUT_RDWR))
        shutdown(pair.client, Int32(SHUT_RDWR))
    }

    private func forwardReplies(_ pair: Pair) {
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(pair.server, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            let chunk = Array(buffer[..<count])
            let isHeld = pair.lock.withLock { () -> Bool in
                guard pair.isHolding else {
                    Self.write(chunk, to: pair.client)
                    return false
                }
                pair.held += chunk
                return true
            }
            if isHeld { lock.withLock { heldCount += 1 } }
        }
        shutdown(pair.client, Int32(SHUT_RDWR))
    }

    private static func contains(_ bytes: [UInt8], _ pattern: [UInt8]) -> Bool {
        guard bytes.count >= pattern.count, !pattern.isEmpty else { return false }
        return (0...(bytes.count - pattern.count)).contains { bytes[$0..<($0 + pattern.count)].elementsEqual(pattern) }
    }

    private static func write(_ bytes: [UInt8], to descriptor: Int32) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes {
                send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard written > 0 else { return }
            offset += written
        }
    }
}
