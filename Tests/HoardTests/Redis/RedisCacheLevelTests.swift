import Foundation
import Hoard
import Testing

@testable import HoardRedis

/// Every command path of the Redis level, against a real server on 127.0.0.1.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason))
struct RedisCacheLevelTests {
    /// A level on the shared server with a namespace no other test uses.
    static func level(_ tag: String = "t", poolSize: Int = 2) throws -> RedisCacheLevel {
        let server = try RedisTestServer.required()
        return try RedisCacheLevel.patient(
            url: server.url,
            namespace: "\(tag)-\(UUID().uuidString)",
            poolSize: poolSize
        )
    }

    @Test func aValueSetIsGotAndAnAbsentKeyIsNotFound() async throws {
        let level = try Self.level()
        try await level.ping()
        try await level.set(Data("hello".utf8), forKey: "k")
        #expect(try await level.get("k") == Data("hello".utf8))
        await #expect(throws: CacheError.notFound) { try await level.get("absent") }
        try await level.set(Data(), forKey: "empty")
        #expect(try await level.get("empty") == Data())
    }

    @Test func removeValueUnlinksAndRemovingAMissingKeyDoesNothing() async throws {
        let level = try Self.level()
        try await level.set(Data("v".utf8), forKey: "k")
        try await level.removeValue(forKey: "k")
        await #expect(throws: CacheError.notFound) { try await level.get("k") }
        try await level.removeValue(forKey: "never there")
    }

    @Test func batchGetsUseOneMGETInKeyOrder() async throws {
        let level = try Self.level()
        for index in 0..<5 { try await level.set(Data("\(index)".utf8), forKey: "k\(index)") }
        let keys = ["k4", "missing", "k0", "k2"]
        #expect(try await level.values(forKeys: keys) == [Data("4".utf8), nil, Data("0".utf8), Data("2".utf8)])
        #expect(try await level.batchGetSome(keys) == [Data("4".utf8), Data("0".utf8), Data("2".utf8)])
        #expect(try await level.values(forKeys: []) == [])
        let batch = level.allBatch()
        #expect(try await batch.get(["k1", "k3"]) == [Data("1".utf8), Data("3".utf8)])
        await #expect(throws: CacheError.notFound) { try await batch.get(["k1", "missing"]) }
        try await batch.set([Data("a".utf8), Data("b".utf8)], forKey: ["x", "y"])
        #expect(try await level.get("y") == Data("b".utf8))
        try await batch.removeValue(forKey: ["x", "y"])
        #expect(try await level.values(forKeys: ["x", "y"]) == [nil, nil])
    }

    @Test func expiryIsKeptToTheMillisecond() async throws {
        let level = try Self.level()
        // A loaded machine may pause this task between the two commands: the bound below allows
        // exactly the time that passed, measured around both, and a millisecond of rounding. The
        // server counts expiry on the wall clock, which a fresh machine's time service may step
        // while the test runs: a step is measured too and allowed for.
        var watch = TwoClockWatch()
        try await level.set(Data("v".utf8), forKey: "ttl", timeToLive: .milliseconds(600_345))
        let left = try #require(try await level.timeToLive(forKey: "ttl"))
        let elapsed = watch.elapsed()
        #expect(left <= .milliseconds(600_345) + elapsed.wallClockStep)
        #expect(
            left >= .milliseconds(600_344) - elapsed.monotonic - elapsed.wallClockStep,
            "\(left) left after \(elapsed.monotonic), wall clock stepped \(elapsed.wallClockStep)"
        )

        // The server's expiry time is the date asked for, to the millisecond: a half second is
        // neither dropped nor rounded to a whole one.
        watch = TwoClockWatch()
        let expiresAt = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + 600).rounded(.down) + 0.5)
        try await level.set(Data("v".utf8), forKey: "date", expiresAt: expiresAt)
        let setElapsed = watch.elapsed()
        let setTook = (setElapsed.monotonic + setElapsed.wallClockStep).components
        let setMilliseconds = setTook.seconds * 1000 + setTook.attoseconds / 1_000_000_000_000_000
        var command = RESPCommand("PEXPIRETIME", arguments: 1)
        command.append(level.namespace + ":date")
        guard case .integer(let milliseconds) = try await level.send(command) else {
            Issue.record("PEXPIRETIME did not answer a number")
            return
        }
        let expected = Int64(expiresAt.timeIntervalSince1970 * 1000)
        // The level turns the date into a time from now, so the server's clock may run ahead by
        // as long as the command took to arrive.
        #expect(
            milliseconds > expected - setMilliseconds - 200 && milliseconds < expected + setMilliseconds + 200,
            "\(milliseconds) for \(expected) after \(setMilliseconds) ms"
        )

        try await level.set(Data("v".utf8), forKey: "forever")
        #expect(try await level.timeToLive(forKey: "forever") == nil)
        await #expect(throws: CacheError.notFound) { try await level.timeToLive(forKey: "absent") }

        try await level.set(Data("v".utf8), forKey: "past", expiresAt: Date().addingTimeInterval(-1))
        await #expect(throws: CacheError.notFound) { try await level.get("past") }
    }

    @Test func aShortExpiryMakesTheValueAMiss() async throws {
        let level = try Self.level()
        try await level.set(Data("v".utf8), forKey: "k", timeToLive: .milliseconds(30))
        // Waits on the condition: the server forgets the key once its 30 ms are over.
        let end = ContinuousClock.now + .seconds(5)
        while (try? await level.get("k")) != nil && ContinuousClock.now < end { await Task.yield() }
        await #expect(throws: CacheError.notFound) { try await level.get("k") }
    }

    @Test func theDefaultTTLAppliesToValuesSetWithoutOne() async throws {
        let server = try RedisTestServer.required()
        let level = try RedisCacheLevel.patient(
            url: server.url,
            namespace: "ttl-\(UUID())",
            defaultTTL: .seconds(3_600)
        )
        try await level.set(Data("v".utf8), forKey: "k")
        let left = try #require(try await level.timeToLive(forKey: "k"))
        #expect(left > .seconds(3_000) && left <= .seconds(3_600))
        try await level.set(Data("v".utf8), forKey: "k2", expiresAt: nil)
        #expect(try await level.timeToLive(forKey: "k2") != nil)
    }

    @Test func namespacesAreIsolatedAndClearLeavesOtherKeys() async throws {
        let server = try RedisTestServer.required()
        let tag = UUID().uuidString
        let a = try RedisCacheLevel.patient(url: server.url, namespace: "a\(tag)")
        let ab = try RedisCacheLevel.patient(url: server.url, namespace: "a\(tag)b")
        let star = try RedisCacheLevel.patient(url: server.url, namespace: "a\(tag)*")
        try await a.set(Data("a".utf8), forKey: "k")
        try await ab.set(Data("ab".utf8), forKey: "k")
        try await star.set(Data("star".utf8), forKey: "k")
        #expect(try await a.get("k") == Data("a".utf8))
        #expect(try await ab.get("k") == Data("ab".utf8))
        for index in 0..<2_500 { try await a.set(Data(), forKey: "many\(index)") }
        // A glob character in a namespace is matched literally: clearing "a…*" leaves "a…" alone.
        await star.clear()
        #expect(try await a.get("k") == Data("a".utf8))
        await #expect(throws: CacheError.notFound) { try await star.get("k") }
        await a.clear()
        await #expect(throws: CacheError.notFound) { try await a.get("k") }
        #expect(try await a.batchGetSome((0..<2_500).map { "many\($0)" }).isEmpty)
        #expect(try await ab.get("k") == Data("ab".utf8))
        try await a.set(Data("again".utf8), forKey: "k")
        #expect(try await a.get("k") == Data("again".utf8))
    }

    @Test(arguments: ["", " ", "\r\n", "*", "key with spaces", "ключ", "🙂", "a:b:c", "\0nul", "$5\r\nhello\r\n"])
    func binaryAndHostileKeysRoundTrip(key: String) async throws {
        let level = try Self.level()
        let value = Data((0...255).map { UInt8($0) })
        try await level.set(value, forKey: key)
        #expect(try await level.get(key) == value)
        #expect(try await level.values(forKeys: [key, "other"]) == [value, nil])
        try await level.removeValue(forKey: key)
        await #expect(throws: CacheError.notFound) { try await level.get(key) }
    }

    @Test func aTenMegabyteValueRoundTrips() async throws {
        // A timeout for 10 MB each way on a loaded machine, under the sanitizers too: alone it takes
        // about a second, but under AddressSanitizer, with the whole suite starting at once, a GET
        // once took more than 10 s.
        let server = try RedisTestServer.required()
        let level = try RedisCacheLevel(url: server.url, namespace: "big-\(UUID())", commandTimeout: .seconds(60))
        // Every byte value, in a pattern that does not repeat every 256 bytes.
        var value = Data(count: 10 << 20)
        value.withUnsafeMutableBytes { bytes in
            for index in stride(from: 0, to: bytes.count, by: 4096) {
                bytes[index] = UInt8(truncatingIfNeeded: index >> 12)
            }
        }
        try await level.set(value, forKey: "big")
        #expect(try await level.get("big") == value)
    }

    @Test func sixtyFourConcurrentCallersShareTheSmallPool() async throws {
        let level = try Self.level(poolSize: 4)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for caller in 0..<64 {
                group.addTask {
                    for round in 0..<50 {
                        let key = "c\(caller)-\(round % 5)"
                        let value = Data("\(caller) \(round)".utf8)
                        try await level.set(value, forKey: key)
                        #expect(try await level.get(key) == value)
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    @Test func aCancelledCallerThrowsCancellation() async throws {
        let level = try Self.level()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await level.get("k")
        }
        await #expect(throws: CancellationError.self) { try await task.value }
    }

    @Test func aBadURLIsAnInvalidConfiguration() {
        for url in ["http://127.0.0.1", "redis://", "redis://host/db", "redis://host:0", "not a url"] {
            #expect(throws: CacheError.self, "\(url)") { try RedisCacheLevel(url: url, namespace: "n") }
        }
        #expect(throws: CacheError.self) { try RedisCacheLevel(url: "redis://h", namespace: "n", poolSize: 0) }
    }

    @Test func theURLGivesEveryField() throws {
        let configuration = try RedisCacheLevel.Configuration(url: "redis://us%40er:p%3Ass@example.com:6380/3")
        #expect(configuration.host == "example.com")
        #expect(configuration.port == 6380)
        #expect(configuration.username == "us@er")
        #expect(configuration.password == "p:ss")
        #expect(configuration.database == 3)
        let bare = try RedisCacheLevel.Configuration(url: "redis://:secret@[::1]")
        #expect(bare.host == "::1" && bare.port == 6379 && bare.username == nil && bare.password == "secret")
        #expect(bare.database == 0)
    }
}

/// Measures the time that passes on the monotonic clock and how far the wall clock moved apart
/// from it (a time service stepping the clock), for checks against a server that counts expiry on
/// the wall clock.
struct TwoClockWatch {
    private let monotonicStart = ContinuousClock.now
    private let wallStart = Date()

    func elapsed() -> (monotonic: Duration, wallClockStep: Duration) {
        let monotonic = ContinuousClock.now - monotonicStart
        let wall = Date().timeIntervalSince(wallStart)
        let monotonicSeconds =
            Double(monotonic.components.seconds)
            + Double(monotonic.components.attoseconds) / 1e18
        return (monotonic, .seconds(abs(wall - monotonicSeconds)))
    }
}
