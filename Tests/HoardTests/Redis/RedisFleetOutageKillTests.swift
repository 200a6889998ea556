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

/// A coherent process that loses its tracking connection (serving its local copies meanwhile) and is
/// killed before tracking comes back, beside a tracked survivor on the same container: what it read
/// during the loss must not be served by the survivor after a change it never heard of.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason), .timeLimit(.minutes(10)))
struct RedisFleetOutageKillTests {
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

    /// A read during a loss of tracking, answered after a change its tracked survivor heard of.
    ///
    /// Two coherent processes share a container, both tracked. One loses its tracking connection and
    /// cannot get it back (it serves its local copies meanwhile, the default). It reads a key; the
    /// key changes on the server, which the survivor hears of (there is no copy to drop); the process
    /// answers its read with the older value after that, flushes, and is killed before tracking came
    /// back (which would have dropped what it kept). The survivor must not serve the value from
    /// before the change: during the loss, a fill stays in memory (see decision 0033), and a fill the
    /// process caught up with the survivor's removal of while it read is not kept at all.
    @Test(arguments: [false, true])
    func aFillDuringALossOfAKilledPeerIsNeverServedByATrackedSurvivor(catchesUpFirst: Bool) async throws {
        let server = try RedisTestServer.required()
        let proxy = try HoldingProxy(upstreamPort: server.port)
        let folder = TemporaryDirectory()
        let namespace = "fleet-outage-\(UUID().uuidString)"
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
            "fleet-watch", folder.url.path, "shared", "redis://127.0.0.1:\(proxy.port)", namespace, "900",
        ])
        _ = await expectLine(peer, "ready")
        // Both are tracked: a fill stays in memory only once the first confirmation (which drops
        // every copy kept before it) has come.
        try #require(await waitUntilOpen(peer))
        try #require(await waitUntilOpen(survivor))
        // The peer's tracking connection is cut at its next ping (the data connections send none
        // once built), and each new one as it subscribes. A connection the proxy accepts after the
        // cut is the tracking connection's next attempt, made once the loss was handed to the cache;
        // the second one is waited for too, in case a data connection reconnected meanwhile.
        let connections = proxy.connectionCount
        proxy.cut(connectionsSendingAnyOf: ["PING", "TRACKING"])
        try #require(await waitUntil(seconds: 600) { proxy.connectionCount >= connections + 2 })
        // It reads the key; the server's answer (the value before the change) is held.
        proxy.holdReplies(toRequestContaining: "\(namespace):key")
        peer.send("start key")
        #expect(await waitUntil(seconds: 600) { proxy.held > 0 })
        // The key changes; the survivor hears of it.
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
        // The peer answers with what it read (kept in memory only if it had not caught up with the
        // survivor's removal of the key meanwhile), flushes, and dies before tracking came back.
        proxy.release()
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
