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

/// A tracked coherent process whose announcement of a change comes later than its survivor's, killed
/// before it came, beside that survivor on the same container: what it read before the change must
/// not be served by the survivor, which heard of the change already.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason), .timeLimit(.minutes(10)))
struct RedisFleetLateInvalidationKillTests {
    /// Reads lines from the child until one starts with `prefix`; records any other as an issue.
    private func expectLine(_ child: WorkerProcess, _ prefix: String) async -> String? {
        let line = await onPlainThread { child.readLine() }
        #expect(line?.hasPrefix(prefix) == true, "expected \(prefix)…, got \(line ?? "the end")")
        return line
    }

    /// Gets `probe` in `child` until its fill stays in memory: the child's local levels are open.
    private func waitUntilOpen(_ child: WorkerProcess) async -> Bool {
        for _ in 0..<600 {
            child.send("get probe")
            if await expectLine(child, "value probe=ready")?.hasSuffix(" memory") == true { return true }
        }
        return false
    }

    /// A tracked process's read, answered after a change its survivor heard of and it had not yet.
    ///
    /// Two coherent processes share a container, both tracked. The server sends both the
    /// announcement of a change at once, but each process handles it on its own thread: here the
    /// peer's comes late (its tracking connection's replies are held, with a ping timeout of an hour
    /// so that the connection is not counted as lost). The peer reads a key; the key changes, which
    /// the survivor hears of (there is no copy to drop, so it journals the key's removal); the peer
    /// answers its read with the value from before, flushes, and is killed before its own
    /// announcement came (which would have dropped the copy). The survivor must not serve the value
    /// from before the change it heard of.
    @Test(arguments: [false, true])
    func aFillOfAKilledPeerThatHadNotHeardOfAChangeIsNeverServedByItsSurvivor(catchesUpFirst: Bool) async throws {
        let server = try RedisTestServer.required()
        let proxy = try HoldingProxy(upstreamPort: server.port)
        let folder = TemporaryDirectory()
        let namespace = "fleet-late-\(UUID().uuidString)"
        // Another instance of the fleet, on a container of its own.
        let other = try TemporaryDirectory().stringBuilder("other")
            .sharedLevel(try RedisCacheLevel(url: server.url, namespace: namespace, commandTimeout: .seconds(10)))
            .build()
        try await other.save("ready", forKey: "probe")
        try await other.save("before", forKey: "key")
        let survivor = try WorkerProcess(["fleet-watch", folder.url.path, "shared", server.url, namespace])
        _ = await expectLine(survivor, "ready")
        // Its read's answer is held while the survivor hears of the change and catches up, which
        // takes minutes in a loaded run: the read waits for it rather than time out (a miss).
        let peer = try WorkerProcess([
            "fleet-watch", folder.url.path, "shared", "redis://127.0.0.1:\(proxy.port)", namespace, "900", "3600",
        ])
        _ = await expectLine(peer, "ready")
        try #require(await waitUntilOpen(peer))
        try #require(await waitUntilOpen(survivor))
        // From its next ping on, what the server sends the peer's tracking connection is held (the
        // data connections send no ping once built): its announcements come late.
        proxy.holdReplies(toRequestContaining: "PING")
        #expect(await waitUntil(seconds: 600) { proxy.held > 0 })
        // It reads the key; the server's answer (the value before the change) is held.
        let heldBefore = proxy.held
        proxy.holdReplies(toRequestContaining: "\(namespace):key")
        peer.send("start key")
        #expect(await waitUntil(seconds: 600) { proxy.held > heldBefore })
        // The key changes; the survivor hears of it, the peer not yet.
        try await other.save("after", forKey: "key")
        await other.flush()
        var heard = false
        for _ in 0..<6_000 where !heard {
            survivor.send("stats")
            let stats = await expectLine(survivor, "stats invalidations ")
            heard = (stats?.split(separator: " ").dropFirst(2).first).flatMap { Int($0) } ?? 0 >= 1
        }
        try #require(heard)
        if catchesUpFirst {
            // A write of another key lands first: the peer catches up with the disk, the survivor's
            // removal of the key included, before its read's answer comes. (Its shared write waits
            // behind the held read: the survivor finds it on the disk.)
            peer.send("put unrelated value")
            _ = await expectLine(peer, "put unrelated")
            var landed = false
            for round in 0..<600 where !landed {
                survivor.send("save catch-up-\(round) value")
                _ = await expectLine(survivor, "saved catch-up-\(round)")
                survivor.send("get unrelated")
                landed = await onPlainThread { survivor.readLine() }?.hasPrefix("value unrelated=value") == true
            }
            try #require(landed)
        }
        // The read's answer comes (the announcement still held); the peer flushes and dies.
        proxy.release(repliesToRequestContaining: "\(namespace):key")
        _ = await expectLine(peer, "value key=before")
        peer.kill()
        #expect(await onPlainThread { peer.wait() } == .killed(SIGKILL))
        // The survivor writes, so that it catches up with the disk, then reads the key: the value
        // after the change, never the one before.
        survivor.send("save other value")
        _ = await expectLine(survivor, "saved other")
        survivor.send("get key")
        _ = await expectLine(survivor, "value key=after")
        survivor.closeInput()
        #expect(await onPlainThread { survivor.wait() } == .exited(0))
        withExtendedLifetime((folder, proxy, other)) {}
    }
}
