import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Several processes, one fleet with `fleetSingleFetch`: every process misses the same cold keys at
/// once, with a slow origin, and the origin is called once per key for the whole fleet.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason), .timeLimit(.minutes(10)))
struct RedisFleetLeaseTests {
    @Test func processesThatMissTheSameColdKeysCallASlowOriginOncePerKey() async throws {
        let server = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let origin = folder.url.appendingPathComponent("origin", isDirectory: true)
        try FileManager.default.createDirectory(at: origin, withIntermediateDirectories: true)
        let namespace = "fleet-lease-\(UUID().uuidString)"
        let keys = (0..<24).map { "key-\($0)" }
        let children = try (0..<4).map { index in
            try WorkerProcess(
                ["fleet-lease", folder.url.path, "child-\(index)", server.url, namespace, origin.path, "50", "8"] + keys
            )
        }
        for child in children {
            let ready = await onPlainThread { child.readLine() }
            #expect(ready == "ready")
        }
        for child in children { child.send("go") }
        var fetches = 0
        for child in children {
            let lines = await onPlainThread { child.readAllLines() }
            #expect(!lines.contains { $0.hasPrefix("bad ") || $0.hasPrefix("error ") }, "\(lines)")
            let done = try #require(lines.last { $0.hasPrefix("done fetches ") })
            fetches += Int(done.split(separator: " ").last ?? "") ?? -1
            #expect(await onPlainThread { child.wait() } == .exited(0))
        }
        // The origin's side effect: one file per call, named after its key.
        let calls = try FileManager.default.contentsOfDirectory(atPath: origin.path)
        for key in keys {
            #expect(calls.filter { $0.hasPrefix("\(key).") }.count == 1, "origin calls for \(key)")
        }
        #expect(calls.count == keys.count)
        #expect(fetches == keys.count)
    }
}
