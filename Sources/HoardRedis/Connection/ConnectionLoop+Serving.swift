// A `ConnectionLoop` serving a connection that is up: writing the requests, reading and parsing
// the replies, and handing them to the requests that wait for them.

import Foundation
import Hoard

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension ConnectionLoop {
    /// Writes requests and delivers replies until the connection breaks or is stopped.
    func serve(_ stream: some ByteStream) -> RedisFailure {
        var output: [UInt8] = []
        var offset = 0
        while true {
            let taken = connection.takeOutgoing()
            if !taken.isEmpty {
                if offset == output.count {
                    output = taken
                    offset = 0
                } else {
                    output += taken
                }
            }
            if offset < output.count || stream.hasPendingOutput,
                case .failure(let failure) = send(stream, &output, &offset)
            {
                return failure
            }
            switch wait(stream.socket, events(stream, writing: offset < output.count), until: nil) {
            case .failure(let failure): return failure
            case .success(let revents):
                guard revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 else { continue }
                switch receive(stream) {
                case .failure(let failure): return failure
                case .success(let replies):
                    guard connection.deliver(replies) else {
                        return RedisFailure(.protocolViolation, "the server sent a reply nobody asked for")
                    }
                }
            }
        }
    }

    /// The events to poll `stream`'s socket for: readable, and writable while `writing` or while
    /// the stream holds bytes for it.
    func events(_ stream: some ByteStream, writing: Bool) -> Int16 {
        Int16(POLLIN) | (writing || stream.hasPendingOutput ? Int16(POLLOUT) : 0)
    }

    /// Sends what the stream takes of `output` from `offset`, after what it held back.
    func send(_ stream: some ByteStream, _ output: inout [UInt8], _ offset: inout Int) -> Result<Void, RedisFailure> {
        if stream.hasPendingOutput {
            switch stream.flush() {
            case .done: break
            case .wouldBlock: return .success(())
            case let transfer: return .failure(sendFailure(transfer))
            }
        }
        while offset < output.count {
            let start = offset
            let transfer = output.withUnsafeBytes { stream.send(UnsafeRawBufferPointer(rebasing: $0[start...])) }
            switch transfer {
            case .done(let count): offset += count
            case .wouldBlock: return .success(())
            default: return .failure(sendFailure(transfer))
            }
        }
        output.removeAll(keepingCapacity: output.capacity <= 1 << 20)
        offset = 0
        return .success(())
    }

    /// Why a send that neither sent nor would block failed.
    private func sendFailure(_ transfer: Socket.Transfer) -> RedisFailure {
        switch transfer {
        case .failed(let error): .system(.connectionLost, "send", errno: error)
        case .refused(let reason): tlsFailure(reason)
        default: RedisFailure(.connectionLost, "the server closed the connection")
        }
    }

    /// A failed TLS session: a refusal during the handshake (TLS 1.3 refuses a missing client
    /// certificate at the first read), a lost connection once it served.
    func tlsFailure(_ reason: String) -> RedisFailure {
        isServing
            ? RedisFailure(.connectionLost, "the TLS connection failed: \(reason)")
            : RedisFailure(.handshake, "the TLS session failed: \(reason)")
    }

    /// Reads what has arrived and parses it: the whole replies it completes, pushes left out.
    func receive(_ stream: some ByteStream) -> Result<[RESPValue], RedisFailure> {
        var replies: [RESPValue] = []
        while true {
            switch stream.receive(into: readBuffer) {
            case .done(let count):
                do {
                    try parser.parse(UnsafeRawBufferPointer(rebasing: readBuffer[..<count])) { value in
                        if case .push(let parts) = value {
                            connection.tracking?.trackingDidReceive(parts)
                            return
                        }
                        replies.append(value)
                    }
                } catch {
                    return .failure(
                        RedisFailure(.protocolViolation, "the reply is not valid RESP: \(error.description)")
                    )
                }
                if count < readBuffer.count { return .success(replies) }
            case .wouldBlock:
                return .success(replies)
            case .closed:
                // What came before the close is delivered first; the next read sees the close again.
                if !replies.isEmpty { return .success(replies) }
                let cut = parser.isInsideReply ? " in the middle of a reply" : ""
                return .failure(RedisFailure(.connectionLost, "the server closed the connection\(cut)"))
            case .failed(let error):
                if !replies.isEmpty { return .success(replies) }
                return .failure(.system(.connectionLost, "recv", errno: error))
            case .refused(let reason):
                if !replies.isEmpty { return .success(replies) }
                return .failure(tlsFailure(reason))
            }
        }
    }
}
