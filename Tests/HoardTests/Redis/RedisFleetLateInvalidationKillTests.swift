import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// A tracked coherent process whose announcement of a change comes later than its survivor's, killed
/// before it came, beside that survivor on the same container: what it read before the change must
/// not be served by the survivor, which heard of the change already.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason), .timeLimit(.minutes(10)))
struct RedisFleetLateInvalidationKillTests {
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
        let stage = try await KilledPeerStage("fleet-late")
        // Its tracking connection's ping timeout is an hour: held replies do not count as a loss.
        let peer = try await stage.startPeer(["3600"])
        try #require(await stage.waitUntilOpen(peer))
        try #require(await stage.waitUntilOpen(stage.survivor))
        // From its next ping on, what the server sends the peer's tracking connection is held (the
        // data connections send no ping once built): its announcements come late.
        let proxy = stage.proxy
        proxy.holdReplies(toRequestContaining: "PING")
        #expect(await waitUntil(seconds: 600) { proxy.held > 0 })
        await stage.startHeldRead(peer)
        // The survivor hears of the change, the peer not yet.
        try await stage.changeTheKey()
        if catchesUpFirst { try await stage.letThePeerCatchUp(peer) }
        // The read's answer comes (the announcement still held); the peer flushes and dies.
        proxy.release(repliesToRequestContaining: "\(stage.namespace):key")
        await stage.killThePeerAndReadFromTheSurvivor(peer)
    }
}
