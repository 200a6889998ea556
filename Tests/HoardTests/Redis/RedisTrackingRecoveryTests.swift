import Foundation
import HoardTestSupport
import Testing

@testable import Hoard
@testable import HoardRedis

/// The tracking connection after a handshake that failed for now (too many clients, a wrong
/// password, `-BUSY`), after a refusal on a server that tracked before or that came after `build()`
/// stopped waiting, and after the last cache on it closed: it retries, and it is freed.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason), .timeLimit(.minutes(10)))
struct RedisTrackingRecoveryTests {
    init() { TestLog.install() }

    /// A fake server whose tracking connection's handshake is answered by `tracking` (given how many
    /// tracking handshakes came before, and the command), every other command as a plain server
    /// would; and the count of tracking `HELLO`s it saw.
    static func fake(
        _ tracking: @escaping @Sendable (Int, String) -> Data?
    ) throws -> (FakeRedisServer, Locked<Int>) {
        let hellos = Locked(0)
        let server = try FakeRedisServer { request in
            if request.contains("HELLO") {
                guard request.contains("-tracking") else { return Data("%0\r\n".utf8) }
                let earlier = hellos.withLock { count in
                    defer { count += 1 }
                    return count
                }
                return tracking(earlier, "HELLO")
            }
            if request.contains("TRACKING") { return tracking(hellos.withLock { $0 } - 1, "TRACKING") }
            if request.contains("PING") { return tracking(hellos.withLock { $0 } - 1, "PING") }
            return Data("_\r\n".utf8)
        }
        return (server, hellos)
    }

    /// A coherent cache on `server`, pinging every 100 ms.
    static func cache(_ folder: TemporaryDirectory, _ server: FakeRedisServer) throws -> Cache<String> {
        let level = try RedisCoherenceTests.level(
            port: server.port,
            namespace: "n",
            clientName: "recovery-\(UUID().uuidString.prefix(8))",
            pingInterval: .milliseconds(100),
            pingTimeout: .seconds(5)
        )
        return try folder.stringBuilder().sharedLevel(level).coherence(.invalidations).build()
    }

    @Test(arguments: [
        ("HELLO", "-ERR max number of clients reached\r\n"),
        ("HELLO", "-WRONGPASS invalid username-password pair or user is disabled.\r\n"),
        ("TRACKING", "-BUSY Redis is busy running a script.\r\n"),
        ("TRACKING", "-LOADING Redis is loading the dataset in memory\r\n"),
    ])
    func aHandshakeErrorThatMayPassIsRetriedAndTrackingComes(step: String, error: String) async throws {
        _ = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let (server, hellos) = try Self.fake { earlier, command in
            if earlier == 0, command == step { return Data(error.utf8) }
            return Data((command == "HELLO" ? "%0\r\n" : command == "PING" ? "+PONG\r\n" : "+OK\r\n").utf8)
        }
        // Before, the first error made build() throw "does not speak RESP3" or "refused to track".
        let cache = try Self.cache(folder, server)
        #expect(await waitUntil { cache.isCoherent })
        #expect(hellos.withLock { $0 } >= 2)
    }

    @Test func aRefusalAfterTrackingWorkedIsRetriedAndTrackingComesBack() async throws {
        _ = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        // The first tracking connection works until its first ping, which closes it; the second
        // handshake is refused as if HELLO were unknown (a failover to an old replica, say); the
        // third works.
        let (server, hellos) = try Self.fake { earlier, command in
            switch (earlier, command) {
            case (0, "PING"): return Data()
            case (1, "HELLO"): return Data("-ERR unknown command 'HELLO'\r\n".utf8)
            case (_, "HELLO"): return Data("%0\r\n".utf8)
            case (_, "PING"): return Data("+PONG\r\n".utf8)
            default: return Data("+OK\r\n".utf8)
            }
        }
        let cache = try Self.cache(folder, server)
        // Before, the refusal stopped the connection for good at the second handshake.
        #expect(await waitUntil { hellos.withLock { $0 } >= 3 && cache.isCoherent })
    }

    /// A refusal that comes once `build()` has stopped waiting (its first handshake failed for a
    /// reason that may pass, and returned) has nobody to throw it to: it is retried like a failure,
    /// and tracking comes once the server allows it (an ACL fixed, a node done starting).
    @Test func aRefusalAfterTheFirstAnswerIsRetriedAndTrackingComes() async throws {
        _ = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let (server, hellos) = try Self.fake { earlier, command in
            switch (earlier, command) {
            // However soon it comes, this is the build's first answer: the connection starts with
            // the build subscribed.
            case (0, "HELLO"): return Data("-ERR max number of clients reached\r\n".utf8)
            case (1, "TRACKING"):
                return Data("-NOPERM this user has no permissions to run the 'client|tracking' command\r\n".utf8)
            case (_, "HELLO"): return Data("%0\r\n".utf8)
            case (_, "PING"): return Data("+PONG\r\n".utf8)
            default: return Data("+OK\r\n".utf8)
            }
        }
        let cache = try Self.cache(folder, server)
        // Before, the refusal at the second handshake stopped the connection for good.
        #expect(await waitUntil(seconds: 600) { hellos.withLock { $0 } >= 3 && cache.isCoherent })
    }

    /// A refusal that reaches a tracking connection shared by a cache built already and a cache
    /// whose `build()` waits for its first answer: the waiting build throws it, and the other cache
    /// keeps the connection, which retries and tracks once the server allows it.
    @Test func aRefusalIsThrownToTheWaitingBuildOnlyAndTheOtherCacheRetries() async throws {
        _ = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let secondHandshake = DispatchSemaphore(value: 0)
        let (server, _) = try Self.fake { earlier, command in
            switch (earlier, command) {
            case (0, "HELLO"): return Data("-ERR max number of clients reached\r\n".utf8)
            case (1, "HELLO"):
                // Held until the second cache waits on the same connection.
                _ = secondHandshake.wait(timeout: .now() + 300)
                return Data("%0\r\n".utf8)
            case (1, "TRACKING"):
                return Data("-NOPERM this user has no permissions to run the 'client|tracking' command\r\n".utf8)
            case (_, "HELLO"): return Data("%0\r\n".utf8)
            case (_, "PING"): return Data("+PONG\r\n".utf8)
            default: return Data("+OK\r\n".utf8)
            }
        }
        var configuration = RedisCacheLevel.Configuration(host: "127.0.0.1", port: Int(server.port))
        configuration.clientName = "shared-\(UUID().uuidString.prefix(8))"
        configuration.trackingPingInterval = .milliseconds(100)
        configuration.trackingPingTimeout = .seconds(5)
        configuration.commandTimeout = .seconds(10)
        // The held handshake must outlast the second build's start, however slow the machine (a
        // handshake that timed out would be retried, track, and let the second build succeed).
        configuration.connectTimeout = .seconds(300)
        configuration.poolSize = 1
        let level = try RedisCacheLevel(configuration, namespace: "n")
        // Its first answer is the passing failure: it returns, and the connection retries.
        let first = try folder.stringBuilder("a").sharedLevel(level).coherence(.invalidations).build()
        let hub = try #require(TrackingHub.hubs.withLock { $0[TrackingHub.key(level.configuration, namespace: "n")] })
        // A plain thread: the build blocks until its first answer.
        let second = Locked<Result<Cache<String>, any Error>?>(nil)
        Thread.detachNewThread {
            let built = Result { try folder.stringBuilder("b").sharedLevel(level).coherence(.invalidations).build() }
            second.withLock { $0 = built }
        }
        #expect(await waitUntil { hub.state.withLock { $0.subscribers.count } == 2 })
        secondHandshake.signal()
        #expect(await waitUntil { second.withLock { $0 } != nil })
        #expect(throws: CacheError.self) { try second.withLock { $0 }?.get() }
        #expect(await waitUntil(seconds: 600) { first.isCoherent })
    }

    @Test func aClosedCoherentCacheFreesItsTrackingConnection() async throws {
        let server = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        for round in 0..<20 {
            let namespace = "free-\(UUID().uuidString)"
            let level = try RedisCoherenceTests.level(
                port: server.port,
                namespace: namespace,
                clientName: "free-\(round)"
            )
            var cache: Cache<String>? = try folder.stringBuilder("c\(round)").sharedLevel(level)
                .coherence(.invalidations).build()
            #expect(await waitUntil { cache?.isCoherent == true })
            let key = TrackingHub.key(level.configuration, namespace: namespace)
            // The hub and its connection hold each other until the last subscriber leaves; the
            // connection owns the wake pipe's two descriptors and the socket.
            weak let hub = TrackingHub.hubs.withLock { $0[key] }
            #expect(hub != nil)
            cache = nil
            #expect(await waitUntil { hub == nil }, "round \(round)")
        }
    }
}
