import Foundation

/// What a connection's I/O thread reads and writes through.
///
/// A plain socket, or a TLS session over one. Only that thread uses it.
protocol ByteStream: AnyObject {
    /// The socket underneath, which the thread polls.
    var socket: Socket { get }
    /// Whether bytes that ``send(_:)`` accepted still wait for the socket: the thread then polls it
    /// for writing and calls ``flush()``.
    var hasPendingOutput: Bool { get }
    /// Sends what it can of `bytes` without blocking; `.done(n)` takes the first `n` bytes.
    func send(_ bytes: UnsafeRawBufferPointer) -> Socket.Transfer
    /// Sends what ``send(_:)`` accepted and the socket did not take yet.
    func flush() -> Socket.Transfer
    /// Receives what has arrived, without blocking; a count short of `buffer.count` means that
    /// nothing more is there for now (the thread polls before it reads again).
    func receive(into buffer: UnsafeMutableRawBufferPointer) -> Socket.Transfer
    /// Whether the server asked for a client certificate during a TLS 1.3 handshake and none was
    /// sent: a server that requires one may then refuse the session at the first read.
    var wasAskedForMissingCertificate: Bool { get }
}

extension Socket: ByteStream {
    var socket: Socket { self }
    var hasPendingOutput: Bool { false }
    var wasAskedForMissingCertificate: Bool { false }
    func flush() -> Transfer { .done(0) }
}
