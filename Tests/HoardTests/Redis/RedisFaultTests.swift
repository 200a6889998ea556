import Foundation
import Hoard
import Testing

@testable import HoardRedis

/// A server that dies, comes back, never answers, or cuts a reply: callers get errors within their
/// timeout, and the pool recovers by itself.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason))
struct RedisFaultTests {
    init() { TestLog.install() }

    private static let timeout = Duration.milliseconds(300)

    /// A level whose connections and commands time out after `timeout`: short where the test is about
    /// the timeout, long where a loaded machine must not turn an answer into one.
    private static func level(_ url: String, poolSize: Int = 2, timeout: Duration = timeout) throws -> RedisCacheLevel {
        try RedisCacheLevel(
            url: url,
            namespace: "faults",
            poolSize: poolSize,
            connectTimeout: timeout,
            commandTimeout: timeout
        )
    }

    /// Sends `command` from a plain thread and expects a `network` error within twice `timeout`
    /// (plus a margin a loaded sanitizer run stays within), timed where the level reports it, on
    /// its I/O thread, so that a busy cooperative pool cannot make the test fail; returns the
    /// error's message.
    @discardableResult
    private static func failsInTime(
        _ level: RedisCacheLevel,
        _ command: RESPCommand,
        timeout: Duration = timeout
    ) async -> String? {
        let outcome = Locked<(Duration, Result<RESPValue, any Error>)?>(nil)
        let done = DispatchSemaphore(value: 0)
        let start = ContinuousClock.now
        level.send(command) { result in
            outcome.withLock { $0 = (ContinuousClock.now - start, result) }
            done.signal()
        }
        #expect(await signalled(done, within: 600), "the level never answered")
        guard let (elapsed, result) = outcome.withLock({ $0 }) else { return nil }
        #expect(elapsed < timeout * 2 + .seconds(10), "answered after \(elapsed)")
        guard case .failure(let error) = result, let error = error as? CacheError else {
            Issue.record("expected a CacheError, got \(result)")
            return nil
        }
        #expect(error.code == .network)
        return error.message
    }

    private static let get = {
        var command = RESPCommand("GET", arguments: 1)
        command.append("faults:k")
        return command
    }()

    /// Waits on the condition, at most `seconds`: `body` succeeds.
    private static func recovers(within seconds: Int = 600, _ body: () async throws -> Void) async -> Bool {
        let end = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < end {
            if (try? await body()) != nil { return true }
            await Task.yield()
        }
        return false
    }

    @Test func nothingListeningIsAnErrorNamingTheServer() async throws {
        _ = try RedisTestServer.required()
        let port = try LocalHTTPServer.closedPort()
        let level = try Self.level("redis://127.0.0.1:\(port)")
        let message = await Self.failsInTime(level, Self.get)
        #expect(message?.contains("127.0.0.1:\(port)") == true)
        #expect(message?.contains("GET") == true)
        // While the pool waits to reconnect, a call fails at once, not after the timeout.
        await Self.failsInTime(level, RESPCommand("SET", ["faults:k", ""]))
    }

    @Test func aServerThatAcceptsAndNeverAnswersTimesOut() async throws {
        _ = try RedisTestServer.required()
        let fake = try FakeRedisServer(script: [])
        let level = try Self.level(fake.url)
        let message = await Self.failsInTime(level, Self.get)
        #expect(message?.contains("127.0.0.1:\(fake.port)") == true)
        await Self.failsInTime(level, RESPCommand("PING", []))
    }

    @Test func aServerThatStopsAnsweringAfterTheHandshakeTimesOut() async throws {
        _ = try RedisTestServer.required()
        let fake = try FakeRedisServer(script: [Data("%0\r\n".utf8)])
        let level = try Self.level(fake.url, poolSize: 1)
        let message = await Self.failsInTime(level, Self.get)
        // "no reply within 300 ms (timeout)", or, when a loaded machine delays even the handshake's
        // answer, "no answer to HELLO within 300 ms".
        #expect(message?.contains("within") == true, "\(message ?? "")")
    }

    @Test func aReplyCutInHalfFailsTheRequestsOnThatConnectionOnly() async throws {
        _ = try RedisTestServer.required()
        let fake = try FakeRedisServer(script: [
            Data("-ERR unknown command 'HELLO'\r\n".utf8),
            Data("$10\r\nhello".utf8),
            nil,
        ])
        // A long timeout: the cut reply, not a slow one, must be what fails the request.
        let level = try Self.level(fake.url, poolSize: 1, timeout: .seconds(10))
        let message = await Self.failsInTime(level, Self.get, timeout: .seconds(10))
        #expect(message?.contains("middle of a reply") == true)
    }

    @Test func aMalformedOrOversizedReplyClosesTheConnectionWithAnError() async throws {
        _ = try RedisTestServer.required()
        for reply in ["?garbage\r\n", "$99999999999\r\n", "*-5\r\n", ":12a\r\n"] {
            let fake = try FakeRedisServer(script: [Data("%0\r\n".utf8), Data(reply.utf8)])
            var configuration = try RedisCacheLevel.Configuration(url: fake.url)
            configuration.maximumReplySize = 1 << 20
            // A long timeout: the reply, not a slow one, must be what fails the request.
            configuration.commandTimeout = .seconds(10)
            configuration.connectTimeout = .seconds(10)
            configuration.poolSize = 1
            let level = try RedisCacheLevel(configuration, namespace: "n")
            let message = await Self.failsInTime(level, Self.get, timeout: .seconds(10))
            #expect(message?.contains("RESP") == true, "\(reply)")
        }
    }

    @Test func aKilledServerFailsCallersInTimeAndARestartedOneIsUsedAgain() async throws {
        _ = try RedisTestServer.required()
        let server = try RedisTestServer.start()
        // Longer than the other tests': the commands before the kill and after the restart must
        // succeed on a loaded machine (each one's time counts its connection and handshake).
        let timeout = Duration.seconds(5)
        let level = try Self.level(server.url, poolSize: 4, timeout: timeout)
        try await level.set(Data("v".utf8), forKey: "k")
        // Callers in flight while the server dies.
        let callers = Task {
            await withTaskGroup(of: Void.self) { group in
                for caller in 0..<16 {
                    group.addTask {
                        for _ in 0..<200 { _ = try? await level.set(Data("\(caller)".utf8), forKey: "c\(caller)") }
                    }
                }
            }
        }
        server.kill()
        let killed = ContinuousClock.now
        await Self.failsInTime(level, Self.get, timeout: timeout)
        await Self.failsInTime(level, Self.get, timeout: timeout)
        await callers.value
        // The outage is logged as its start and a count every 10 s, not a line per attempt of each
        // of the four connections.
        let subject = "Redis at 127.0.0.1:\(server.port) "
        let outage = TestLog.messages(containing: subject)
        let tens = Int(killed.duration(to: .now).components.seconds / 10)
        #expect(outage.count >= 1 && outage.count <= 1 + tens, "\(outage.map(\.message))")

        let restarted = try await HoardTests.eventually { try RedisTestServer.start(port: server.port) }
        #expect(await Self.recovers { try await level.ping() })
        // A line says so.
        #expect(!TestLog.messages(containing: subject + "works again").isEmpty)
        try await level.set(Data("back".utf8), forKey: "k")
        #expect(try await level.get("k") == Data("back".utf8))
        // Every connection of the pool came back, not only one.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<32 { group.addTask { try await level.set(Data(), forKey: "after\(index)") } }
            try await group.waitForAll()
        }
        restarted.stop()
    }

    /// How many of the server's connections are named `name` (`CLIENT LIST`), asked through `admin`.
    private static func clients(named name: String, on admin: RedisCacheLevel) async throws -> Int {
        let list = try await admin.send(RESPCommand("CLIENT", ["LIST"])).bytes ?? Data()
        return String(decoding: list, as: UTF8.self).split(separator: "\n").count(where: { line in
            line.split(separator: " ").contains { $0 == "name=\(name)" }
        })
    }

    /// Checks `condition` until it holds, every 10 ms, at most `seconds`: a bound against a hang,
    /// generous for a loaded machine.
    private static func eventually(within seconds: Int = 600, _ condition: () async throws -> Bool) async -> Bool {
        let end = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < end {
            if (try? await condition()) == true { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return (try? await condition()) == true
    }

    @Test func aReleasedLevelStopsItsConnections() async throws {
        let shared = try RedisTestServer.required()
        // The shared server serves other tests at once: only the connections of this name count.
        let name = "released-\(UUID().uuidString.prefix(8))"
        let admin = try RedisCacheLevel(url: shared.url, namespace: "admin", commandTimeout: .seconds(10))
        var configuration = try RedisCacheLevel.Configuration(url: shared.url)
        configuration.clientName = name
        configuration.poolSize = 4
        configuration.connectTimeout = .seconds(10)
        configuration.commandTimeout = .seconds(10)
        var levels: [RedisCacheLevel] = []
        for _ in 0..<5 {
            let level = try RedisCacheLevel(configuration, namespace: "faults")
            try await level.ping()
            levels.append(level)
        }
        // Every connection of every level is up (they connect in the background)…
        #expect(await Self.eventually { try await Self.clients(named: name, on: admin) == 20 })
        levels.removeAll()
        // …and releasing the levels closes them all.
        #expect(await Self.eventually { try await Self.clients(named: name, on: admin) == 0 })
    }
}
