import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// A coherent process that loses its tracking connection (serving its local copies meanwhile) and is
/// killed before tracking comes back, beside a tracked survivor on the same container: what it read
/// during the loss must not be served by the survivor after a change it never heard of.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason), .timeLimit(.minutes(10)))
struct RedisFleetOutageKillTests {
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
        let stage = try await KilledPeerStage("fleet-outage")
        let peer = try await stage.startPeer()
        // Both are tracked: a fill stays in memory only once the first confirmation (which drops
        // every copy kept before it) has come.
        try #require(await stage.waitUntilOpen(peer))
        try #require(await stage.waitUntilOpen(stage.survivor))
        // The peer's tracking connection is cut at its next ping (the data connections send none
        // once built), and each new one as it subscribes. A connection the proxy accepts after the
        // cut is the tracking connection's next attempt, made once the loss was handed to the cache;
        // the second one is waited for too, in case a data connection reconnected meanwhile.
        let proxy = stage.proxy
        let connections = proxy.connectionCount
        proxy.cut(connectionsSendingAnyOf: ["PING", "TRACKING"])
        try #require(await waitUntil(seconds: 600) { proxy.connectionCount >= connections + 2 })
        await stage.startHeldRead(peer)
        try await stage.changeTheKey()
        if catchesUpFirst { try await stage.letThePeerCatchUp(peer) }
        // The peer answers with what it read (kept in memory only if it had not caught up with the
        // survivor's removal of the key meanwhile), flushes, and dies before tracking came back.
        proxy.release()
        await stage.killThePeerAndReadFromTheSurvivor(peer)
    }
}
