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

/// A coherent process killed before its first tracked connection is up, beside a survivor on the
/// same container: what it read while untracked must not be served by the survivor after a change
/// it never heard of.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason), .timeLimit(.minutes(10)))
struct RedisFleetStartupKillTests {
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

    /// An untracked process's read, answered after a change its tracked survivor heard of.
    ///
    /// A process whose tracking connection cannot come up (serving its local copies until it does)
    /// shares its container with a tracked survivor. It reads a key; the key changes on the server,
    /// which the survivor hears of (there is no copy to drop yet); the untracked process answers its
    /// read with the older value after that, flushes, and is killed before its tracking ever came up
    /// (which would have dropped what it kept). The survivor must not serve the value from before
    /// the change: the fill's disk write must not land after the survivor's removal (see decisions
    /// 0025 and 0033), nor the fill be kept once the process caught up with that removal.
    @Test(arguments: [false, true])
    func anUntrackedFillOfAKilledPeerIsNeverServedByATrackedSurvivor(catchesUpFirst: Bool) async throws {
        let server = try RedisTestServer.required()
        let proxy = try HoldingProxy(upstreamPort: server.port)
        let folder = TemporaryDirectory()
        let namespace = "fleet-untracked-\(UUID().uuidString)"
        // Another instance of the fleet, on a container of its own.
        let other = try TemporaryDirectory().stringBuilder("other")
            .sharedLevel(try RedisCacheLevel(url: server.url, namespace: namespace, commandTimeout: .seconds(10)))
            .build()
        try await other.save("ready", forKey: "probe")
        try await other.save("before", forKey: "key")
        let survivor = try WorkerProcess(["fleet-watch", folder.url.path, "shared", server.url, namespace])
        _ = await expectLine(survivor, "ready")
        // The untracked process's tracking connection is cut each time it subscribes: it serves its
        // local copies until its first tracked connection, which never comes.
        proxy.cut(connectionsSending: "TRACKING")
        // Its read's answer is held while the survivor hears of the change and catches up, which
        // takes minutes in a loaded run: the read waits for it rather than time out (a miss).
        let untracked = try WorkerProcess([
            "fleet-watch", folder.url.path, "shared", "redis://127.0.0.1:\(proxy.port)", namespace, "900",
        ])
        _ = await expectLine(untracked, "ready")
        try #require(await waitUntilOpen(untracked))
        try #require(await waitUntilOpen(survivor))
        // It reads the key; the server's answer (the value before the change) is held.
        proxy.holdReplies(toRequestContaining: "\(namespace):key")
        untracked.send("start key")
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
            // A write of another key lands first: the untracked process catches up with the disk,
            // the survivor's removal of the key included, before its read's answer comes. (Its
            // shared write waits behind the held read: the survivor finds it on the disk.)
            untracked.send("put unrelated value")
            _ = await expectLine(untracked, "put unrelated")
            var landed = false
            for round in 0..<600 where !landed {
                survivor.send("save catch-up-\(round) value")
                _ = await expectLine(survivor, "saved catch-up-\(round)")
                survivor.send("get unrelated")
                landed = await onPlainThread { survivor.readLine() }?.hasPrefix("value unrelated=value") == true
            }
            try #require(landed)
        }
        // The untracked process answers with what it read (kept in memory only if it had not caught
        // up with the survivor's removal of the key meanwhile), flushes, and dies before tracking
        // ever came.
        proxy.release()
        _ = await expectLine(untracked, "value key=before")
        untracked.kill()
        #expect(await onPlainThread { untracked.wait() } == .killed(SIGKILL))
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
