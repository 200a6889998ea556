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
    func serve(_ socket: Socket) -> RedisFailure {
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
            if offset < output.count, case .failure(let failure) = send(socket, &output, &offset) { return failure }
            let events = Int16(POLLIN) | (offset < output.count ? Int16(POLLOUT) : 0)
            switch wait(socket, events, until: nil) {
            case .failure(let failure): return failure
            case .success(let revents):
                guard revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 else { continue }
                switch receive(socket) {
                case .failure(let failure): return failure
                case .success(let replies):
                    guard connection.deliver(replies) else {
                        return RedisFailure(.protocolViolation, "the server sent a reply nobody asked for")
                    }
                }
            }
        }
    }

    /// Sends what the socket takes of `output` from `offset`.
    func send(_ socket: Socket, _ output: inout [UInt8], _ offset: inout Int) -> Result<Void, RedisFailure> {
        while offset < output.count {
            let start = offset
            let transfer = output.withUnsafeBytes { socket.send(UnsafeRawBufferPointer(rebasing: $0[start...])) }
            switch transfer {
            case .done(let count): offset += count
            case .wouldBlock: return .success(())
            case .closed: return .failure(RedisFailure(.connectionLost, "the server closed the connection"))
            case .failed(let error): return .failure(.system(.connectionLost, "send", errno: error))
            }
        }
        output.removeAll(keepingCapacity: output.capacity <= 1 << 20)
        offset = 0
        return .success(())
    }

    /// Reads what has arrived and parses it: the whole replies it completes, pushes left out.
    func receive(_ socket: Socket) -> Result<[RESPValue], RedisFailure> {
        var replies: [RESPValue] = []
        while true {
            switch socket.receive(into: readBuffer) {
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
            }
        }
    }
}
