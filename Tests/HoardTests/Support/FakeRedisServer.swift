import Foundation

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A listening socket on 127.0.0.1 that plays a script instead of being a Redis server: for each
/// chunk a connection sends, the next answer of the script (`nil` closes the connection, at once
/// when it follows an answer); once the script is played, it reads and never answers.
///
/// Or, made with a responder, the answer it gives to each chunk; or whatever a connection's server
/// does with it.
final class FakeRedisServer: Sendable {
    let port: UInt16
    var url: String { "redis://127.0.0.1:\(port)" }
    private let descriptor: Int32

    /// Starts listening; every connection plays `script` from its start.
    convenience init(script: [Data?]) throws {
        try self.init { connection in Self.play(script, on: connection) }
    }

    /// Starts listening; each chunk a connection sends is shown to `respond` as text, which
    /// answers with the bytes to send back: `nil` sends nothing, empty bytes close the connection.
    ///
    /// For the handshakes that depend on what came before (a first refusal, then a welcome).
    convenience init(respond: @escaping @Sendable (String) -> Data?) throws {
        try self.init { connection in
            Self.answer({ text in respond(text).map { ($0, closes: $0.isEmpty) } }, on: connection)
        }
    }

    /// Starts listening; each chunk a connection sends is shown to `respond` as text, which answers
    /// with the bytes to send back, and whether to close the connection once they are sent (`nil`
    /// sends nothing).
    ///
    /// For a reply cut in its middle by a close.
    convenience init(respondAndClose respond: @escaping @Sendable (String) -> (Data, closes: Bool)?) throws {
        try self.init { connection in Self.answer(respond, on: connection) }
    }

    /// Starts listening; `serve` has each connection's socket to itself, for a server that answers on
    /// a schedule of its own (closing the socket is its job).
    convenience init(serving serve: @escaping @Sendable (Int32) -> Void) throws {
        try self.init(serve: serve)
    }

    private init(serve: @escaping @Sendable (Int32) -> Void) throws {
        #if canImport(Darwin)
        let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #else
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #endif
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard descriptor >= 0, bound == 0, named == 0, listen(descriptor, 64) == 0 else {
            close(descriptor)
            throw TestServerError("cannot listen on 127.0.0.1: errno \(errno)")
        }
        self.descriptor = descriptor
        port = UInt16(bigEndian: address.sin_port)
        Thread.detachNewThread {
            while true {
                let connection = accept(descriptor, nil, nil)
                guard connection >= 0 else {
                    if errno == EINTR { continue }
                    return
                }
                Thread.detachNewThread { serve(connection) }
            }
        }
    }

    deinit {
        shutdown(descriptor, Int32(SHUT_RDWR))
        close(descriptor)
    }

    private static func answer(_ respond: @Sendable (String) -> (Data, closes: Bool)?, on connection: Int32) {
        defer { close(connection) }
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = recv(connection, &buffer, buffer.count, 0)
            guard count > 0 else { return }
            guard let (answer, closes) = respond(String(decoding: buffer[..<count], as: UTF8.self)) else { continue }
            #if canImport(Darwin)
            let flags: Int32 = 0
            #else
            let flags = Int32(MSG_NOSIGNAL)
            #endif
            if !answer.isEmpty { _ = answer.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, flags) } }
            if closes { return endGracefully(connection) }
        }
    }

    private static func play(_ script: [Data?], on connection: Int32) {
        defer { close(connection) }
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var step = 0
        while recv(connection, &buffer, buffer.count, 0) > 0 {
            guard step < script.count else { continue }
            guard let answer = script[step] else { return endGracefully(connection) }
            step += 1
            #if canImport(Darwin)
            let flags: Int32 = 0
            #else
            let flags = Int32(MSG_NOSIGNAL)
            #endif
            _ = answer.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, flags) }
            // A `nil` right after an answer closes the connection at once, cutting what was sent.
            if step < script.count, script[step] == nil { return endGracefully(connection) }
        }
    }

    /// Ends the connection so that everything sent arrives before the close: a socket closed with
    /// unread bytes sends a reset, which can discard what was sent but not yet delivered (a loaded
    /// machine then turns "a reply cut in its middle" into "a connection reset").
    ///
    /// Sends the end of the stream, then reads until the client closes (at most 30 s); the caller
    /// closes the socket.
    private static func endGracefully(_ connection: Int32) {
        shutdown(connection, Int32(SHUT_WR))
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8](repeating: 0, count: 4_096)
        while recv(connection, &buffer, buffer.count, 0) > 0 {}
    }
}
