import Foundation
import HoardTestSupport
import Testing

@testable import Hoard
@testable import HoardRedis

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A stalled server (`SIGSTOP`, a long `DEBUG SLEEP`) is skipped after a few timeouts in a row, so
/// that calls fail at once instead of each waiting the command timeout, and used again once it
/// answers a probe.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason), .timeLimit(.minutes(10)))
struct RedisCircuitBreakerTests {
    init() { TestLog.install() }

    /// A server that answers `HELLO` at once and holds every other command while `stalled` is set,
    /// then answers everything held, in order, as a stopped process that is continued would.
    struct StallingServer: Sendable {
        let stalled = Protected(true)
        let seen = Protected([String]())
        let fake: FakeRedisServer

        init() throws {
            let (stalled, seen) = (self.stalled, self.seen)
            fake = try FakeRedisServer(serving: { socket in Self.serve(socket, stalled: stalled, seen: seen) })
        }

        func count(_ command: String) -> Int { seen.withLock { $0.filter { $0 == command }.count } }

        private static func serve(_ socket: Int32, stalled: Protected<Bool>, seen: Protected<[String]>) {
            defer { close(socket) }
            var wait = timeval(tv_sec: 0, tv_usec: 20_000)
            setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
            var buffer = [UInt8](repeating: 0, count: 65_536)
            var held: [String] = []
            while true {
                let count = recv(socket, &buffer, buffer.count, 0)
                if count == 0 || (count < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) { return }
                if count > 0 {
                    // Each command is an array: `*n`, `$length`, its name, its arguments.
                    let lines = String(decoding: buffer[..<count], as: UTF8.self).components(separatedBy: "\r\n")
                    var names: [String] = []
                    for (index, line) in lines.enumerated() where line.hasPrefix("*") && index + 2 < lines.count {
                        names.append(lines[index + 2].uppercased())
                    }
                    seen.withLock { $0 += names }
                    held += names
                }
                var reply = ""
                while let name = held.first, name == "HELLO" || !stalled.withLock({ $0 }) {
                    held.removeFirst()
                    switch name {
                    case "HELLO": reply += "%0\r\n"
                    case "PING": reply += "+PONG\r\n"
                    default: reply += "$1\r\nv\r\n"
                    }
                }
                if !reply.isEmpty {
                    let bytes = Array(reply.utf8)
                    #if canImport(Darwin)
                    let flags: Int32 = 0
                    #else
                    let flags = Int32(MSG_NOSIGNAL)
                    #endif
                    _ = send(socket, bytes, bytes.count, flags)
                }
            }
        }
    }

    private static func kind(_ error: (any Error)?) -> RedisFailure.Kind? {
        ((error as? CacheError)?.underlyingError as? RedisFailure)?.kind
    }

    @Test func aStalledServerIsSkippedAfterThreeTimeoutsAndUsedAgainOnceItAnswersAProbe() async throws {
        _ = try RedisTestServer.required()
        let server = try StallingServer()
        var configuration = try RedisCacheLevel.Configuration(url: server.fake.url)
        configuration.poolSize = 1
        configuration.connectTimeout = .seconds(30)
        // Short: the server holds every reply, so each of the first gets times out whatever the value.
        configuration.commandTimeout = .milliseconds(200)
        let level = try RedisCacheLevel(configuration, namespace: "n")
        // Each get fails for the server's silence (it waits its timeout, or its connection, given up
        // for silence, refuses it at once); after three in a row the server is skipped.
        var timedOut = 0
        while !level.isSkippingServer && timedOut < 100 {
            let error = await #expect(throws: CacheError.self) { try await level.get("k") }
            #expect(Self.kind(error) == .timeout, "\(String(describing: error))")
            timedOut += 1
        }
        #expect(level.isSkippingServer)
        let sent = server.count("GET")
        // Skipped: never sent, so no wait for a reply.
        for _ in 0..<20 {
            let error = await #expect(throws: CacheError.self) { try await level.get("k") }
            #expect(Self.kind(error) == .skipped)
            #expect(error?.code == .network)
            #expect(error?.message.contains("skipped") == true)
        }
        #expect(server.count("GET") == sent)
        #expect(TestLog.messages(containing: "Redis at 127.0.0.1:\(server.fake.port): 3 commands in a row").count == 1)
        // The server comes back: a probe finds it, and calls go to it again.
        server.stalled.withLock { $0 = false }
        #expect(await waitUntil { !level.isSkippingServer })
        #expect(server.count("PING") >= 1)
        #expect(try await level.get("k") == Data("v".utf8))
        #expect(TestLog.messages(containing: "Redis at 127.0.0.1:\(server.fake.port) answers again").count == 1)
    }

    /// Requests that leave with little of their time left do not get a server skipped.
    ///
    /// A Redis Cluster level's command may wait for a map through an election, or pause on
    /// `CLUSTERDOWN`, and then go to the node just elected with a few milliseconds left. Timing out
    /// then says nothing of that node: a burst of such timeouts must not open its circuit, while
    /// requests that had their whole time still do.
    @Test func timeoutsOfRequestsSentWithLittleTimeLeftDoNotSkipTheServer() async throws {
        _ = try RedisTestServer.required()
        let server = try StallingServer()
        var configuration = try RedisCacheLevel.Configuration(url: server.fake.url)
        configuration.poolSize = 1
        configuration.connectTimeout = .seconds(30)
        configuration.commandTimeout = .seconds(2)
        let pool = try RedisPool(configuration)
        for _ in 0..<10 {
            let error = await #expect(throws: CacheError.self) {
                try await pool.send(RESPCommand("GET", ["k"]), key: "k", deadline: .now + .milliseconds(20))
            }
            #expect(Self.kind(error) == .timeout, "\(String(describing: error))")
        }
        #expect(!pool.breaker.isOpen)
        // With their whole time, three in a row get it skipped.
        var timedOut = 0
        while !pool.breaker.isOpen && timedOut < 100 {
            let error = await #expect(throws: CacheError.self) {
                try await pool.send(RESPCommand("GET", ["k"]), key: "k", deadline: .now + configuration.commandTimeout)
            }
            #expect(Self.kind(error) == .timeout, "\(String(describing: error))")
            timedOut += 1
        }
        #expect(pool.breaker.isOpen)
        #expect(timedOut == 3)
    }

    @Test func aReplyOfAnyKindEndsARunOfTimeoutsAndZeroNeverSkips() {
        let breaker = CircuitBreaker(threshold: 3)
        let timeout = Result<RESPValue, RedisFailure>.failure(RedisFailure(.timeout, "no reply"))
        let refused = Result<RESPValue, RedisFailure>.failure(RedisFailure(.server, "the server answered ERR"))
        let lost = Result<RESPValue, RedisFailure>.failure(RedisFailure(.connectionLost, "closed"))
        #expect(breaker.record(timeout) == nil)
        #expect(breaker.record(timeout) == nil)
        #expect(breaker.record(refused) == nil)
        #expect(breaker.record(timeout) == nil)
        #expect(breaker.record(lost) == nil)
        #expect(breaker.record(timeout) == nil)
        #expect(breaker.refusal() == nil)
        let opened = breaker.record(timeout)
        #expect(opened?.pause == CircuitBreaker.firstPause)
        #expect(breaker.refusal()?.kind == .skipped)
        guard let opening = opened?.opening else { return }
        // A probe that times out doubles the pause, up to the maximum; an answer closes the circuit.
        #expect(breaker.probed(timeout, opening: opening) == .seconds(2))
        #expect(breaker.probed(timeout, opening: opening) == .seconds(4))
        for _ in 0..<10 { _ = breaker.probed(timeout, opening: opening) }
        #expect(breaker.probed(timeout, opening: opening) == CircuitBreaker.maximumPause)
        #expect(breaker.probed(refused, opening: opening) == nil)
        #expect(!breaker.isOpen)
        // A reply to a request sent before the circuit opened closes it too; a late probe of that
        // opening then changes nothing.
        for _ in 0..<3 { _ = breaker.record(timeout) }
        #expect(breaker.isOpen)
        #expect(breaker.record(.success(.simpleString("OK"))) == nil)
        #expect(!breaker.isOpen)
        #expect(breaker.probed(timeout, opening: opening + 1) == nil)
        #expect(!breaker.isOpen)
        let never = CircuitBreaker(threshold: 0)
        for _ in 0..<100 { #expect(never.record(timeout) == nil) }
        #expect(!never.isOpen)
        #expect(throws: CacheError.self) {
            var configuration = RedisCacheLevel.Configuration(host: "127.0.0.1", port: 6379)
            configuration.timeoutsBeforeSkipping = -1
            _ = try RedisCacheLevel(configuration, namespace: "n")
        }
    }
}
