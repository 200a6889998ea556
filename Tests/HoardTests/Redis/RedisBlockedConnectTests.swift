import Foundation
import HoardTestSupport
import Testing

@testable import Hoard
@testable import HoardRedis

/// A connection attempt whose host name lookup or credentials provider blocks: a resolver that is
/// slow or hangs (replaced through `ConnectionLoop.replacedLookups`), a provider that waits on a
/// vault that does not answer.
///
/// Neither may hold the commands past their own deadline, and neither may cost a thread per
/// attempt while it hangs: an attempt that gives up on the call leaves it running, and the next
/// one waits for that call instead of making another.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason), .timeLimit(.minutes(15)))
struct RedisBlockedConnectTests {
    init() { TestLog.install() }

    /// Calls that block until the test lets them go, counted.
    private final class HeldCalls: Sendable {
        private struct State {
            var calls = 0
            var running = 0
            var mostRunning = 0
            var isReleased = false
        }

        private let gate = DispatchSemaphore(value: 0)
        private let state = Locked(State())

        /// How many calls began.
        var calls: Int { state.withLock { $0.calls } }
        /// How many calls were under way at once, at most.
        var mostRunning: Int { state.withLock { $0.mostRunning } }
        /// How many calls are under way now.
        var running: Int { state.withLock { $0.running } }

        /// Blocks until ``release()``, unless it was called already.
        func call() {
            let isReleased = state.withLock { state in
                state.calls += 1
                state.running += 1
                state.mostRunning = max(state.mostRunning, state.running)
                return state.isReleased
            }
            if !isReleased {
                gate.wait()
                // Each call let go lets the next one go.
                gate.signal()
            }
            state.withLock { $0.running -= 1 }
        }

        /// Lets every call go, now and from now on.
        func release() {
            state.withLock { $0.isReleased = true }
            gate.signal()
        }
    }

    /// A host name of the test's own whose lookup waits for `held`, then finds 127.0.0.1.
    private static func heldHostName(_ held: HeldCalls) -> String {
        let host = "held-\(UUID().uuidString.lowercased()).invalid"
        ConnectionLoop.replacedLookups.withLock { lookups in
            lookups[host] = { _, port in
                held.call()
                return SocketAddress.resolve(host: "127.0.0.1", port: port)
            }
        }
        return host
    }

    /// Stores `"served"` under `k` through `level`, and reads it back.
    private static func roundTrip(_ level: RedisCacheLevel) async throws -> Data {
        try await level.set(Data("served".utf8), forKey: "k")
        return try await level.get("k")
    }

    private static func kind(_ error: CacheError?) -> RedisFailure.Kind? {
        (error?.underlyingError as? RedisFailure)?.kind
    }

    /// The error of `level.get("k")`, and whether it ended within a minute: far more than the
    /// command timeouts here, far less than the connect timeouts the first tests set.
    private static func failureOfGet(_ level: RedisCacheLevel) async -> (ended: Bool, error: CacheError?) {
        let outcome = Locked<CacheError?>(nil)
        let ended = DispatchSemaphore(value: 0)
        let task = Task {
            do {
                _ = try await level.get("k")
            } catch {
                outcome.withLock { $0 = error as? CacheError }
            }
            ended.signal()
        }
        // Ten minutes, against the connection's hour: in a loaded run (ThreadSanitizer, every suite at
        // once on two cores) the call's task can wait minutes for a thread before it even starts.
        let inTime = await signalled(ended, within: 600)
        // A call left waiting for the blocked step ends now.
        task.cancel()
        return (inTime, outcome.withLock { $0 })
    }

    /// A configuration for one connection that waits for a command's reply 200 ms and for a
    /// connection an hour.
    private static func configuration(host: String, port: UInt16) -> RedisCacheLevel.Configuration {
        var configuration = RedisCacheLevel.Configuration(host: host, port: Int(port))
        configuration.connectTimeout = .seconds(3_600)
        configuration.commandTimeout = .milliseconds(200)
        configuration.poolSize = 1
        return configuration
    }

    @Test func aCommandTimesOutAtItsDeadlineWhileTheCredentialsProviderBlocks() async throws {
        _ = try RedisTestServer.required()
        let server = try RedisTestServer.start(configuration: ["requirepass s3cret"])
        let held = HeldCalls()
        defer { held.release() }
        var configuration = Self.configuration(host: "127.0.0.1", port: server.port)
        configuration.credentials = .init {
            held.call()
            return RedisCacheLevel.Credentials(password: "s3cret")
        }
        let level = try RedisCacheLevel(configuration, namespace: "held-login")
        #expect(await waitUntil { held.running == 1 })

        let (ended, error) = await Self.failureOfGet(level)
        #expect(ended, "a command waited past its timeout for the credentials provider")
        #expect(Self.kind(error) == .timeout, "\(error?.message ?? "no error")")

        // The provider answers: the connection logs in with what it gave, and serves.
        held.release()
        #expect(try await eventually { try await Self.roundTrip(level) } == Data("served".utf8))
        #expect(held.calls == 1)
    }

    @Test func aCommandTimesOutAtItsDeadlineWhileTheHostNameLookupBlocks() async throws {
        let server = try RedisTestServer.required()
        let held = HeldCalls()
        let host = Self.heldHostName(held)
        defer {
            held.release()
            ConnectionLoop.replacedLookups.withLock { $0[host] = nil }
        }
        let level = try RedisCacheLevel(Self.configuration(host: host, port: server.port), namespace: "held-lookup")
        #expect(await waitUntil { held.running == 1 })

        let (ended, error) = await Self.failureOfGet(level)
        #expect(ended, "a command waited past its timeout for the host name lookup")
        #expect(Self.kind(error) == .timeout, "\(error?.message ?? "no error")")

        // The lookup answers: the connection connects to what it found, and serves.
        held.release()
        #expect(try await eventually { try await Self.roundTrip(level) } == Data("served".utf8))
        #expect(held.calls == 1)
    }

    /// Gets `k` again and again until a get fails with a message that contains `text` (an attempt
    /// after the first gave up on the call the first one began), while `held` has at most one call
    /// under way; at most two minutes.
    private static func getUntilFailure(
        containing text: String,
        _ level: RedisCacheLevel,
        _ held: HeldCalls
    ) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline && held.mostRunning <= 1 {
            let (ended, error) = await Self.failureOfGet(level)
            try #require(ended, "a command waited past its timeout for the blocked step")
            if error?.message.contains(text) == true { return true }
        }
        return false
    }

    @Test func aCredentialsProviderThatHangsIsCalledOnceAtATime() async throws {
        _ = try RedisTestServer.required()
        let server = try RedisTestServer.start(configuration: ["requirepass s3cret"])
        let held = HeldCalls()
        defer { held.release() }
        var configuration = Self.configuration(host: "127.0.0.1", port: server.port)
        configuration.credentials = .init {
            held.call()
            return RedisCacheLevel.Credentials(password: "s3cret")
        }
        // Attempts give up on the provider one after another; a command lasts as long as one.
        configuration.connectTimeout = .milliseconds(100)
        configuration.commandTimeout = .seconds(10)
        configuration.timeoutsBeforeSkipping = 0
        let level = try RedisCacheLevel(configuration, namespace: "hung-login")

        #expect(try await Self.getUntilFailure(containing: "under way since an earlier attempt", level, held))
        #expect(held.calls == 1)
        #expect(held.mostRunning == 1)

        // When the call answers at last, the next attempt logs in with what it gave.
        held.release()
        #expect(try await eventually { try await Self.roundTrip(level) } == Data("served".utf8))
    }

    @Test func aHostNameLookupThatHangsIsMadeOnceAtATime() async throws {
        let server = try RedisTestServer.required()
        let held = HeldCalls()
        let host = Self.heldHostName(held)
        defer {
            held.release()
            ConnectionLoop.replacedLookups.withLock { $0[host] = nil }
        }
        var configuration = Self.configuration(host: host, port: server.port)
        configuration.connectTimeout = .milliseconds(100)
        configuration.commandTimeout = .seconds(10)
        configuration.timeoutsBeforeSkipping = 0
        let level = try RedisCacheLevel(configuration, namespace: "hung-lookup")

        #expect(try await Self.getUntilFailure(containing: "under way since an earlier attempt", level, held))
        #expect(held.calls == 1)
        #expect(held.mostRunning == 1)

        held.release()
        #expect(try await eventually { try await Self.roundTrip(level) } == Data("served".utf8))
    }

    /// Stops a connection made with `configuration` once `held` blocks it, and waits until the
    /// connection is gone: its thread ended, though the blocked call never returns.
    private static func connectionEndsWhenStopped(
        _ configuration: RedisCacheLevel.Configuration,
        _ held: HeldCalls
    ) async throws -> Bool {
        weak var gone: RedisConnection?
        do {
            let connection = try #require(RedisConnection(configuration))
            gone = connection
            #expect(await waitUntil { held.running == 1 })
            connection.stop()
        }
        return await waitUntil(seconds: 600) { gone == nil }
    }

    @Test func aStoppedConnectionEndsWhileItsCredentialsProviderHangs() async throws {
        _ = try RedisTestServer.required()
        let server = try RedisTestServer.start(configuration: ["requirepass s3cret"])
        let held = HeldCalls()
        defer { held.release() }
        var configuration = Self.configuration(host: "127.0.0.1", port: server.port)
        configuration.credentials = .init {
            held.call()
            return RedisCacheLevel.Credentials(password: "s3cret")
        }
        #expect(try await Self.connectionEndsWhenStopped(configuration, held))
    }

    @Test func aStoppedConnectionEndsWhileItsHostNameLookupHangs() async throws {
        let server = try RedisTestServer.required()
        let held = HeldCalls()
        let host = Self.heldHostName(held)
        defer {
            held.release()
            ConnectionLoop.replacedLookups.withLock { $0[host] = nil }
        }
        #expect(try await Self.connectionEndsWhenStopped(Self.configuration(host: host, port: server.port), held))
    }
}
