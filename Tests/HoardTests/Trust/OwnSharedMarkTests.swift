import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// A process's own marks of shared changes on their way, carried after another process's snapshot:
/// they come back to it through the journal, and are not another process's change.
@Suite(.timeLimit(.minutes(10)))
struct OwnSharedMarkTests {
    init() { TestLog.install() }

    enum Change: CaseIterable, Sendable {
        case removal
        case clear
    }

    /// The remover, catching up with its own mark carried by another process, still reads the key
    /// from the shared level.
    ///
    /// Its shared change is made; another instance of the fleet then sets the key there, and
    /// another process on the container writes a snapshot that carries the mark after it.
    @Test(arguments: Change.allCases)
    func aRemoversOwnMarkCarriedByAnotherProcessDoesNotKeepItFromTheSharedLevel(_ change: Change) async throws {
        let folder = TemporaryDirectory()
        let elsewhereFolder = TemporaryDirectory()
        let shared = GatedInvalidatingLevel()
        let remover = try folder.stringBuilder().sharedLevel(shared).fetcher { _ in "fetched" }.build()
        try await remover.save("old", forKey: "k")
        await remover.flush()
        switch change {
        case .removal: remover.removeValue(forKey: "k")
        case .clear: remover.removeAll()
        }
        // The shared change is made, the mark journaled.
        await remover.flush()
        #expect(shared.base.store.values["k"] == nil)
        // Another instance of the fleet, on a container of its own, sets the key afresh.
        let elsewhere = try elsewhereFolder.stringBuilder().sharedLevel(shared).build()
        try await elsewhere.save("fresh", forKey: "k")
        // Another process on the container learns of the mark and writes a snapshot (its clear), which
        // carries the mark after it.
        let other = try folder.stringBuilder().build(sharingStore: false)
        await other.flush()
        other.clearDisk()
        await other.flush()
        // The remover catches up with that journal.
        await remover.flush()
        let read = try await remover.getOrFetch(forKey: "k")
        #expect(read == "fresh", "\(change): the remover took its own carried mark for another process's")
        withExtendedLifetime((elsewhere, other, elsewhereFolder)) {}
    }
}
