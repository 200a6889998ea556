import Foundation
import HoardTestSupport
import Testing

@testable import Hoard
@testable import HoardRedis

/// A level pointed at a node of a Redis Cluster says so when the node redirects it, instead of a
/// bare `MOVED`: Cluster is not supported yet.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason), .timeLimit(.minutes(10)))
struct RedisClusterNodeTests {
    init() { TestLog.install() }

    @Test func aRedirectionSaysTheServerIsAClusterNode() async throws {
        _ = try RedisTestServer.required()
        // The bus port is a free one of its own: the default, the port + 10 000, may be taken or
        // past 65 535 for a port the system picked.
        func node() throws -> (RedisTestServer, bus: UInt16) {
            let bus = try LocalHTTPServer.closedPort()
            return (try RedisTestServer.start(configuration: ["cluster-enabled yes", "cluster-port \(bus)"]), bus)
        }
        let (owner, ownerBus) = try node()
        let (other, _) = try node()
        let ownerLevel = try RedisCacheLevel.patient(url: owner.url, namespace: "cluster")
        let level = try RedisCacheLevel.patient(url: other.url, namespace: "cluster")
        _ = try await ownerLevel.send(RESPCommand("CLUSTER", ["ADDSLOTSRANGE", "0", "16383"]))
        _ = try await level.send(RESPCommand("CLUSTER", ["MEET", "127.0.0.1", String(owner.port), String(ownerBus)]))
        // The other node redirects once it has heard, through the cluster bus, who owns the slots.
        var redirection: CacheError?
        #expect(
            await waitUntilAsync {
                do {
                    _ = try await level.get("k")
                } catch let error as CacheError where error.message.contains("MOVED") {
                    redirection = error
                    return true
                } catch {}
                return false
            }
        )
        let error = try #require(redirection)
        #expect(error.message.contains("node of a Redis Cluster"), "\(error.message)")
        #expect(error.code == .serverRefused)
    }
}
