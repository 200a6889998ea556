import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// A coherent process killed before its first tracked connection is up, beside a survivor on the
/// same container: what it read while untracked must not be served by the survivor after a change
/// it never heard of.
@Suite(.enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason), .timeLimit(.minutes(10)))
struct RedisFleetStartupKillTests {
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
        let stage = try await KilledPeerStage("fleet-untracked")
        // The untracked process's tracking connection is cut each time it subscribes: it serves its
        // local copies until its first tracked connection, which never comes.
        stage.proxy.cut(connectionsSending: "TRACKING")
        let untracked = try await stage.startPeer()
        try #require(await stage.waitUntilOpen(untracked))
        try #require(await stage.waitUntilOpen(stage.survivor))
        await stage.startHeldRead(untracked)
        try await stage.changeTheKey()
        if catchesUpFirst { try await stage.letThePeerCatchUp(untracked) }
        // The untracked process answers with what it read (kept in memory only if it had not caught
        // up with the survivor's removal of the key meanwhile), flushes, and dies before tracking
        // ever came.
        stage.proxy.release()
        await stage.killThePeerAndReadFromTheSurvivor(untracked)
    }
}
