import Foundation
import HoardTestSupport
import Testing

@testable import Hoard
@testable import HoardRedis

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A reply that comes after its request timed out, or that a closed connection cuts off, never
/// reaches another request: every value a get returns is its own key's.
///
/// The server answers each `GET` with the key it was asked for, so that a reply given to the wrong
/// request shows. It holds every reply until the test releases it: the first gets time out, later
/// ones are sent behind them, and then everything is answered at once, on a connection that is still
/// open, one the client gave up, or one the server cuts in the middle of a reply.
@Suite(.timeLimit(.minutes(10)))
struct RedisLateReplyTests {
    /// The command timeout.
    ///
    /// A get sent behind the timed-out ones is answered well within it, unless the machine stalls for
    /// as long; then it times out too, and what the tests check still holds.
    private static let timeout = Duration.seconds(1)

    /// What happened: the server received a command (`HELLO`, or the key of any other), or a get
    /// ended.
    private enum Event: Sendable {
        case received(String)
        case finished(String)
    }

    /// What the test has read of the events so far.
    private struct Watcher {
        var events: AsyncStream<Event>.Iterator
        /// What the server received, in order.
        var received: [String] = []
        /// The keys whose gets ended.
        var finished: Set<String> = []

        /// Reads events until `condition` holds.
        mutating func wait(until condition: (Watcher) -> Bool) async {
            while !condition(self), let event = await events.next() {
                switch event {
                case .received(let what): received.append(what)
                case .finished(let key): finished.insert(key)
                }
            }
        }

        /// Waits until the server received the get of each of `keys`, or it ended without.
        mutating func wait(forSent keys: [String]) async {
            await wait { watcher in
                keys.allSatisfy { watcher.received.contains(stored($0)) || watcher.finished.contains($0) }
            }
        }

        /// Waits until the server saw `count` handshakes (connections).
        mutating func wait(forHandshakes count: Int) async {
            await wait { watcher in watcher.received.count(where: { $0 == "HELLO" }) >= count }
        }
    }

    /// A server that answers `HELLO` at once, and every other command, in order, with the bytes of its
    /// last argument (a `GET`'s key); it holds the replies until ``release(cuttingAfter:)``.
    private final class Server: Sendable {
        private struct State {
            var isHolding = true
            /// Each open connection's replies held back, oldest first.
            var held: [Int32: [[UInt8]]] = [:]
        }

        private let state: Protected<State>
        private let fake: FakeRedisServer
        var url: String { fake.url }

        init(events: AsyncStream<Event>.Continuation) throws {
            let state = Protected(State())
            fake = try FakeRedisServer(serving: { Self.serve($0, state, events) })
            self.state = state
        }

        /// Sends the replies held so far and answers at once from then on; with `cut`, sends only
        /// that many whole, then half of the next, and closes the connection.
        func release(cuttingAfter cut: Int? = nil) {
            state.withLock { state in
                state.isHolding = false
                for (socket, replies) in state.held where !replies.isEmpty {
                    var bytes = Array(replies.prefix(cut ?? replies.count).joined())
                    if let cut, cut < replies.count { bytes += replies[cut].prefix(replies[cut].count / 2) }
                    Self.transmit(bytes, on: socket)
                    // The connection's thread sees the end of stream and closes the socket.
                    if cut != nil { shutdown(socket, Int32(SHUT_RDWR)) }
                    state.held[socket] = []
                }
            }
        }

        private static func serve(
            _ socket: Int32,
            _ state: Protected<State>,
            _ events: AsyncStream<Event>.Continuation
        ) {
            state.withLock { $0.held[socket] = [] }
            defer {
                // Forgotten before it is closed, so that a release never writes to a reused number.
                state.withLock { $0.held[socket] = nil }
                close(socket)
            }
            var buffer: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = recv(socket, &chunk, chunk.count, 0)
                guard count > 0 else { return }
                buffer += chunk[..<count]
                for command in commands(in: &buffer) {
                    let isHello = command.first == "HELLO"
                    let argument = command.last ?? ""
                    let reply = Array((isHello ? "%0\r\n" : "$\(argument.utf8.count)\r\n\(argument)\r\n").utf8)
                    state.withLock { state in
                        // A handshake is the first command of its connection: nothing is held before it.
                        if state.isHolding, !isHello {
                            state.held[socket, default: []].append(reply)
                        } else {
                            transmit(reply, on: socket)
                        }
                    }
                    events.yield(.received(isHello ? "HELLO" : command.last ?? ""))
                }
            }
        }

        private static func transmit(_ bytes: [UInt8], on socket: Int32) {
            #if canImport(Darwin)
            let flags: Int32 = 0
            #else
            let flags = Int32(MSG_NOSIGNAL)
            #endif
            _ = bytes.withUnsafeBytes { send(socket, $0.baseAddress, $0.count, flags) }
        }

        /// Takes the whole commands (arrays of bulk strings) from the start of `buffer`.
        private static func commands(in buffer: inout [UInt8]) -> [[String]] {
            var commands: [[String]] = []
            var start = 0
            parsing: while true {
                var cursor = start
                guard let count = number(after: "*", in: buffer, at: &cursor) else { break }
                var parts: [String] = []
                for _ in 0..<count {
                    guard let length = number(after: "$", in: buffer, at: &cursor), cursor + length + 2 <= buffer.count
                    else { break parsing }
                    parts.append(String(decoding: buffer[cursor..<(cursor + length)], as: UTF8.self))
                    cursor += length + 2
                }
                commands.append(parts)
                start = cursor
            }
            buffer.removeFirst(start)
            return commands
        }

        /// Reads `<marker><digits>\r\n` at `cursor`, and moves past it; `nil` when it is not all there.
        private static func number(after marker: Unicode.Scalar, in buffer: [UInt8], at cursor: inout Int) -> Int? {
            guard cursor < buffer.count, buffer[cursor] == UInt8(ascii: marker) else { return nil }
            guard let end = buffer[cursor...].firstIndex(of: UInt8(ascii: "\r")), end + 1 < buffer.count,
                let value = Int(String(decoding: buffer[(cursor + 1)..<end], as: UTF8.self))
            else { return nil }
            cursor = end + 2
            return value
        }
    }

    /// The key the server sees for `key`, and the reply it sends for it.
    private static func stored(_ key: String) -> String { "n:" + key }

    /// A level that never stops sending for timeouts: the late replies of timed-out commands, and
    /// the commands after them, are what these tests follow.
    private static func level(_ server: Server) throws -> RedisCacheLevel {
        var configuration = try RedisCacheLevel.Configuration(url: server.url)
        configuration.poolSize = 1
        configuration.connectTimeout = .seconds(30)
        configuration.commandTimeout = timeout
        configuration.timeoutsBeforeSkipping = 0
        return try RedisCacheLevel(configuration, namespace: "n")
    }

    private typealias Outcomes = [String: Result<Data, any Error>]

    /// Gets each of `keys` in a task of its own, all at once, telling `events` as each ends.
    private static func getAll(
        _ keys: [String],
        _ level: RedisCacheLevel,
        _ events: AsyncStream<Event>.Continuation
    ) -> Task<Outcomes, Never> {
        Task {
            await withTaskGroup(of: (String, Result<Data, any Error>).self) { group in
                for key in keys {
                    group.addTask {
                        let result: Result<Data, any Error>
                        do {
                            result = .success(try await level.get(key))
                        } catch {
                            result = .failure(error)
                        }
                        events.yield(.finished(key))
                        return (key, result)
                    }
                }
                var outcomes: Outcomes = [:]
                for await (key, result) in group { outcomes[key] = result }
                return outcomes
            }
        }
    }

    /// Expects each get to have returned its own key's reply, or failed in one of the `allowed` ways.
    ///
    /// - Returns: How many returned a value.
    @discardableResult
    private static func check(
        _ outcomes: Outcomes,
        allowing allowed: [RedisFailure.Kind],
        sourceLocation: SourceLocation = #_sourceLocation
    ) -> Int {
        var answered = 0
        for (key, outcome) in outcomes.sorted(by: { $0.key < $1.key }) {
            switch outcome {
            case .success(let value):
                answered += 1
                #expect(
                    value == Data(stored(key).utf8),
                    "GET \(key) returned \(String(decoding: value, as: UTF8.self))",
                    sourceLocation: sourceLocation
                )
            case .failure(let error):
                let kind = ((error as? CacheError)?.underlyingError as? RedisFailure)?.kind
                #expect(
                    kind.map(allowed.contains) == true,
                    "GET \(key) failed: \(error)",
                    sourceLocation: sourceLocation
                )
            }
        }
        return answered
    }

    private static func keys(_ name: String, _ count: Int) -> [String] { (0..<count).map { "\(name)-\($0)" } }

    @Test func lateRepliesMeetTheirOwnRequestsOnTheConnectionThatWaitedForThem() async throws {
        let (events, sink) = AsyncStream<Event>.makeStream()
        let server = try Server(events: sink)
        let level = try Self.level(server)
        var watcher = Watcher(events: events.makeAsyncIterator())
        // The first gets time out: the server holds their replies.
        #expect(Self.check(await Self.getAll(Self.keys("early", 5), level, sink).value, allowing: [.timeout]) == 0)
        // More go out behind them on the same connection, before the oldest waited twice the timeout.
        let late = Self.keys("late", 5)
        let lateGets = Self.getAll(late, level, sink)
        await watcher.wait(forSent: late)
        // Every reply comes now, those of the timed-out gets first.
        server.release()
        Self.check(await lateGets.value, allowing: [.timeout])
        // And the gets after them are answered at once.
        Self.check(await Self.getAll(Self.keys("after", 20), level, sink).value, allowing: [.timeout])
    }

    @Test func lateRepliesToAConnectionGivenUpForSilenceReachNoOne() async throws {
        let (events, sink) = AsyncStream<Event>.makeStream()
        let server = try Server(events: sink)
        let level = try Self.level(server)
        var watcher = Watcher(events: events.makeAsyncIterator())
        #expect(Self.check(await Self.getAll(Self.keys("early", 5), level, sink).value, allowing: [.timeout]) == 0)
        // One more is written behind them and times out too: by then the oldest has waited twice the
        // timeout, and the connection is given up.
        #expect(Self.check(await Self.getAll(["last"], level, sink).value, allowing: [.timeout]) == 0)
        // The late replies go out as it closes, while the next connection opens.
        server.release()
        await watcher.wait(forHandshakes: 2)
        Self.check(await Self.getAll(Self.keys("after", 20), level, sink).value, allowing: [.timeout])
    }

    @Test func aConnectionCutWithLateRepliesInFlightRetriesOnlyGetsWithNoReplyByte() async throws {
        let (events, sink) = AsyncStream<Event>.makeStream()
        let server = try Server(events: sink)
        let level = try Self.level(server)
        var watcher = Watcher(events: events.makeAsyncIterator())
        #expect(Self.check(await Self.getAll(Self.keys("early", 5), level, sink).value, allowing: [.timeout]) == 0)
        let late = Self.keys("late", 5)
        let lateGets = Self.getAll(late, level, sink)
        await watcher.wait(forSent: late)
        // More gets race the cut: written before it, met by the end of stream, or queued as retries
        // while the connection waits to reconnect.
        let racing = Self.getAll(Self.keys("racing", 10), level, sink)
        // The five early replies and two late ones whole, half of the third late one, then the close:
        // the gets with no byte of their reply are sent again on the next connection.
        server.release(cuttingAfter: 7)
        Self.check(await lateGets.value, allowing: [.timeout, .connectionLost])
        Self.check(await racing.value, allowing: [.timeout, .connectionLost])
        await watcher.wait(forHandshakes: 2)
        Self.check(await Self.getAll(Self.keys("after", 20), level, sink).value, allowing: [.timeout, .connectionLost])
    }
}
