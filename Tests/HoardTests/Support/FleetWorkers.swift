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

/// Reads a line from `child`; records it as an issue unless it starts with `prefix`.
func expectLine(
    _ child: WorkerProcess,
    _ prefix: String,
    sourceLocation: SourceLocation = #_sourceLocation
) async -> String? {
    let line = await onPlainThread { child.readLine() }
    #expect(
        line?.hasPrefix(prefix) == true,
        "expected \(prefix)…, got \(line ?? "the end")",
        sourceLocation: sourceLocation
    )
    return line
}

/// Two coherent `fleet-watch` workers on one container, and another instance of their fleet on a
/// container of its own: the stage of the tests in which one worker (the peer) reads a key, the key
/// changes while the read's answer is held, the survivor hears of the change, and the peer, which
/// has not, answers with the older value and is killed.
///
/// Whatever the peer kept, the survivor must then serve the value after the change, never the one
/// before (decisions 0025, 0033 and 0035).
struct KilledPeerStage {
    let server: RedisTestServer
    /// Between the peer and the server: holds the peer's read, cuts or holds its tracking.
    let proxy: HoldingProxy
    let folder: TemporaryDirectory
    let namespace: String
    /// Another instance of the fleet, on a container of its own: it makes the change.
    let other: Cache<String>
    let survivor: WorkerProcess

    /// Starts the other instance, which stores `probe` and `key` ("before"), and the survivor.
    init(_ namespacePrefix: String) async throws {
        server = try RedisTestServer.required()
        proxy = try HoldingProxy(upstreamPort: server.port)
        folder = TemporaryDirectory()
        namespace = "\(namespacePrefix)-\(UUID().uuidString)"
        other = try TemporaryDirectory().stringBuilder("other")
            .sharedLevel(try RedisCacheLevel(url: server.url, namespace: namespace, commandTimeout: .seconds(10)))
            .build()
        try await other.save("ready", forKey: "probe")
        try await other.save("before", forKey: "key")
        // Ten minutes for a ping's answer: a loaded run must not count the survivor's tracking lost,
        // or it may never hear the change that `changeTheKey()` waits for.
        survivor = try WorkerProcess(["fleet-watch", folder.url.path, "shared", server.url, namespace, "10", "600"])
        _ = await expectLine(survivor, "ready")
    }

    /// Starts the peer, connected through the proxy, with `arguments` after the command timeout.
    ///
    /// Its read's answer is held while the survivor hears of the change and catches up, which takes
    /// minutes in a loaded run: its commands wait 900 s rather than time out (a miss).
    func startPeer(_ arguments: [String] = []) async throws -> WorkerProcess {
        let peer = try WorkerProcess(
            ["fleet-watch", folder.url.path, "shared", "redis://127.0.0.1:\(proxy.port)", namespace, "900"]
                + arguments
        )
        _ = await expectLine(peer, "ready")
        return peer
    }

    /// Gets `probe` in `child` until its fill stays in memory: the child's local levels are open.
    func waitUntilOpen(_ child: WorkerProcess) async -> Bool {
        for _ in 0..<600 {
            child.send("get probe")
            if await expectLine(child, "value probe=ready")?.hasSuffix(" memory") == true { return true }
        }
        return false
    }

    /// The peer starts its read of `key`, whose answer (the value before the change) the proxy holds.
    func startHeldRead(_ peer: WorkerProcess) async {
        let heldBefore = proxy.held
        proxy.holdReplies(toRequestContaining: "\(namespace):key")
        peer.send("start key")
        #expect(await waitUntil(seconds: 600) { proxy.held > heldBefore })
    }

    /// The other instance changes `key` to "after"; returns once the survivor heard of it.
    func changeTheKey() async throws {
        try await other.save("after", forKey: "key")
        await other.flush()
        var heard = false
        for _ in 0..<6_000 where !heard {
            survivor.send("stats")
            let stats = await expectLine(survivor, "stats invalidations ")
            heard = (stats?.split(separator: " ").dropFirst(2).first).flatMap { Int($0) } ?? 0 >= 1
        }
        try #require(heard)
    }

    /// A write of another key by the peer lands: the peer catches up with the disk, the survivor's
    /// removal of `key` included, before its read's answer comes. (Its shared write waits behind the
    /// held read: the survivor finds it on the disk.)
    func letThePeerCatchUp(_ peer: WorkerProcess) async throws {
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

    /// Waits for the peer's answer, the value before the change (which the caller released), and
    /// kills the peer once it flushed; then the survivor writes, so that it catches up with the
    /// disk, and must read the value after the change.
    func killThePeerAndReadFromTheSurvivor(_ peer: WorkerProcess) async {
        _ = await expectLine(peer, "value key=before")
        peer.kill()
        #expect(await onPlainThread { peer.wait() } == .killed(SIGKILL))
        survivor.send("save other value")
        _ = await expectLine(survivor, "saved other")
        survivor.send("get key")
        _ = await expectLine(survivor, "value key=after")
        survivor.closeInput()
        #expect(await onPlainThread { survivor.wait() } == .exited(0))
    }
}
