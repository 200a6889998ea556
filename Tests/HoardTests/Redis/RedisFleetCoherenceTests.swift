import Foundation
import HoardRedis
import HoardTestSupport
import Testing

@testable import Hoard

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Two processes, one coherent fleet: a set or a removal in this process makes the child's next read
/// the new value or a miss, never the old one; and the time from the set returning here to the
/// child's memory dropping the key, measured on the machine's monotonic clock.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason), .timeLimit(.minutes(10)))
struct RedisFleetCoherenceTests {
    /// A level of `namespace` on `url` whose tracking connection a loaded run (ThreadSanitizer on
    /// two cores) does not count lost: a loss drops the local copies the tests look at, and an
    /// invalidation sent meanwhile is never heard, so a wait for it would fail.
    static func level(_ url: String, namespace: String) throws -> RedisCacheLevel {
        var configuration = try RedisCacheLevel.Configuration(url: url)
        configuration.commandTimeout = .seconds(10)
        configuration.trackingPingTimeout = .seconds(600)
        return try RedisCacheLevel(configuration, namespace: namespace)
    }

    @Test func aWriteInOneProcessDropsTheOtherProcesssCopy() async throws {
        let server = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let namespace = "fleet-coherent-\(UUID().uuidString)"
        let writer = try folder.stringBuilder("parent")
            .sharedLevel(try Self.level(server.url, namespace: namespace))
            .coherence(.invalidations)
            .build()
        // The child's tracking connection has ten minutes to answer a ping, as this process's.
        let child = try WorkerProcess(["fleet-watch", folder.url.path, "child", server.url, namespace, "10", "600"])
        _ = await expectLine(child, "ready")
        var latencies: [UInt64] = []
        for round in 0..<50 {
            let key = "k\(round % 4)"
            try await writer.save("old-\(round)", forKey: key)
            // The child reads the old value into memory (again, if the write's own invalidation
            // reached it during the read, which then is not installed).
            var installed = false
            for _ in 0..<100 where !installed {
                child.send("get \(key)")
                let line = await expectLine(child, "value \(key)=old-\(round)")
                installed = line?.hasSuffix(" memory") == true
            }
            #expect(installed)
            child.send("watch \(key) old-\(round)")
            _ = await expectLine(child, "watching \(key)")
            try await writer.save("new-\(round)", forKey: key)
            let saved = monotonicNanoseconds()
            let dropped = await expectLine(child, "dropped \(key) ")
            let at = dropped.flatMap { UInt64($0.split(separator: " ").last ?? "") } ?? saved
            latencies.append(at > saved ? at - saved : 0)
            child.send("get \(key)")
            _ = await expectLine(child, "value \(key)=new-\(round)")
            // A removal: the child's next read misses.
            child.send("watch \(key) new-\(round)")
            _ = await expectLine(child, "watching \(key)")
            writer.removeValue(forKey: key)
            await writer.flush()
            _ = await expectLine(child, "dropped \(key) ")
            child.send("get \(key)")
            _ = await expectLine(child, "miss \(key)")
        }
        child.send("stats")
        let stats = await expectLine(child, "stats invalidations ")
        #expect((stats?.split(separator: " ").dropFirst(2).first).flatMap { Int($0) } ?? 0 >= 150)
        child.closeInput()
        #expect(await onPlainThread { child.wait() } == .exited(0))
        latencies.sort()
        func micro(_ nanoseconds: UInt64) -> String { "\(nanoseconds / 1_000) µs" }
        print(
            "Two processes, \(latencies.count) sets: invalidation latency p50 \(micro(latencies[latencies.count / 2])), "
                + "p99 \(micro(latencies[latencies.count * 99 / 100])), max \(micro(latencies[latencies.count - 1]))"
        )
        withExtendedLifetime((writer, folder)) {}
    }

    /// A coherent peer process reads a key from the shared level before this process's save of it,
    /// its reply comes once the save is on the disk they share (the save's shared write not made yet),
    /// and it is killed once its fill is on disk, before the save's invalidation could reach it: the
    /// fill must not replace the saved value on that disk.
    ///
    /// This process saves without coherence: a coherent one's echo check would find the peer's file
    /// too (see the next test), and the fill must not land whoever saved.
    @Test func aKilledPeersFillNeverReplacesASaveOnTheSharedDisk() async throws {
        let server = try RedisTestServer.required()
        let proxy = try HoldingProxy(upstreamPort: server.port)
        let folder = TemporaryDirectory()
        let namespace = "fleet-fill-\(UUID().uuidString)"
        let shared = HeldWritesLevel(
            try RedisCacheLevel(url: server.url, namespace: namespace, commandTimeout: .seconds(10))
        )
        let cache = try folder.stringBuilder("shared").sharedLevel(shared).build()
        try await cache.save("old", forKey: "key")
        try await cache.save("ready", forKey: "probe")
        // Its read's answer is held while this process saves, which takes minutes in a loaded run:
        // the read waits for it rather than time out (a miss).
        let peer = try WorkerProcess([
            "fleet-watch", folder.url.path, "shared", "redis://127.0.0.1:\(proxy.port)", namespace, "900", "600",
        ])
        _ = await expectLine(peer, "ready")
        // The peer's build emptied the disk; once its fills stay in memory, its local levels are open.
        var isOpen = false
        for _ in 0..<100 where !isOpen {
            peer.send("get probe")
            isOpen = await expectLine(peer, "value probe=ready")?.hasSuffix(" memory") == true
        }
        try #require(isOpen)
        // The peer misses on disk and reads the server's value; the reply is held.
        proxy.holdReplies(toRequestContaining: "\(namespace):key")
        peer.send("get key")
        #expect(await waitUntil { proxy.held > 0 })
        // The save lands on disk; its shared write waits.
        let write = shared.holdNextSet()
        let saving = Task { try await cache.save("new", forKey: "key") }
        #expect(await waitUntil { shared.setsStarted == 3 })
        await cache.disk?.flush()
        // The peer gets the older value, keeps it and flushes it to disk; then it dies, before the
        // save's invalidation could reach it.
        proxy.release()
        _ = await expectLine(peer, "value key=old")
        peer.kill()
        #expect(await onPlainThread { peer.wait() } == .killed(SIGKILL))
        write.open()
        try await saving.value
        // Another write makes this process catch up with what the peer changed on the disk; with the
        // memory copy gone, the disk holds the save, or nothing, never the older value.
        cache["other"] = "value"
        await cache.flush()
        cache.clearMemory()
        #expect(cache["key"] != "old")
        #expect(try await cache.getOrFetch(forKey: "key") == "new")
        withExtendedLifetime((folder, proxy)) {}
    }

    /// A peer process saves a key after this process's save of it landed on the disk they share and
    /// before it reached the server, and is killed before this save's invalidation could reach it:
    /// its value, the server's older one, must not stay on that disk over this process's save.
    @Test func aKilledPeersEarlierSaveNeverStaysOverALaterSaveOnTheSharedDisk() async throws {
        let server = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let namespace = "fleet-save-\(UUID().uuidString)"
        let shared = HeldWritesLevel(try Self.level(server.url, namespace: namespace))
        let cache = try folder.stringBuilder("shared")
            .sharedLevel(shared)
            .coherence(.invalidations(maxLocalAge: .seconds(86_400)))
            .build()
        try await cache.save("ready", forKey: "probe")
        let peer = try WorkerProcess(["fleet-watch", folder.url.path, "shared", server.url, namespace, "10", "600"])
        _ = await expectLine(peer, "ready")
        // The peer's build emptied the disk; once its fills stay in memory, its local levels are open.
        var isOpen = false
        for _ in 0..<100 where !isOpen {
            peer.send("get probe")
            isOpen = await expectLine(peer, "value probe=ready")?.hasSuffix(" memory") == true
        }
        try #require(isOpen)
        // This process's save lands on disk; its shared write waits.
        let heard = cache.statistics.invalidations
        let write = shared.holdNextSet()
        let answer = shared.holdNextSetAnswer()
        let saving = Task { try await cache.save("later", forKey: "key") }
        #expect(await waitUntil { shared.setsStarted == 2 })
        await cache.disk?.flush()
        // The peer's save lands on disk after it, and on the server before it; then the peer dies,
        // before this save's invalidation could reach it.
        peer.send("save key earlier")
        _ = await expectLine(peer, "saved key")
        peer.kill()
        #expect(await onPlainThread { peer.wait() } == .killed(SIGKILL))
        // This save reaches the server; its answer comes once both writes were announced here.
        write.open()
        #expect(await waitUntil { cache.statistics.invalidations >= heard + 2 })
        answer.open()
        try await saving.value
        #expect(await waitUntil { cache.echoChecksUnderWay == 0 })
        // Another write makes this process catch up with what the peer changed on the disk; with the
        // memory copy gone, the disk holds this save, or nothing, never the peer's.
        cache["other"] = "value"
        await cache.flush()
        cache.clearMemory()
        #expect(cache["key"] != "earlier")
        #expect(try await cache.getOrFetch(forKey: "key") == "later")
        withExtendedLifetime(folder) {}
    }

    private func monotonicNanoseconds() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }
}
