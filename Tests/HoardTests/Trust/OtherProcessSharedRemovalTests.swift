import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Another process removes a key (or clears) while its change of the shared level is still on its
/// way: this process learns of the removal through the container's journal, reads the key, finds
/// the old value on the shared level, and must not keep it on the container, where it would outlive
/// the removal once that lands.
///
/// "Another process" is a second cache on the container with a disk store of its own
/// (`sharingStore: false`), on the same shared level, without coherence: it cannot see the
/// remover's queue of shared writes, only its journal.
@Suite(.timeLimit(.minutes(10)))
struct OtherProcessSharedRemovalTests {
    init() { TestLog.install() }

    /// The change the remover holds on its way to the shared level.
    enum Change: CaseIterable, Sendable {
        case removal
        case clear
    }

    @Test(arguments: Change.allCases)
    func aReadOfAKeyAnotherProcessRemovedKeepsNoOldValueOnTheContainer(_ change: Change) async throws {
        let folder = TemporaryDirectory()
        let shared = GatedInvalidatingLevel()
        let remover = try folder.stringBuilder().sharedLevel(shared).build()
        let reader = try folder.stringBuilder().sharedLevel(shared).build(sharingStore: false)
        try await remover.save("old", forKey: "k")
        await remover.flush()
        let gate = change == .removal ? shared.holdNextRemoval() : shared.holdNextClear()
        switch change {
        case .removal: remover.removeValue(forKey: "k")
        case .clear: remover.removeAll()
        }
        // The local copies are gone and journaled; the shared level still holds "old".
        #expect(await waitUntil { shared.heldChanges == 1 })
        #expect(shared.base.store.values["k"] != nil)
        #expect(folder.entryFiles().isEmpty)
        // The reader catches up with the journal (its flush takes a section), then reads the key.
        await reader.flush()
        _ = try? await reader.getOrFetch(forKey: "k")
        await reader.flush()
        gate.open()
        await remover.flush()
        #expect(shared.base.store.values["k"] == nil)
        // The removal is confirmed everywhere: nothing may serve "old" again.
        let reopened = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        #expect(reopened["k"] == nil, "\(change): a fresh cache reads the removed value from the container")
        await remover.flush()
        #expect(remover["k"] == nil, "\(change): the remover reads its removed value back from the container")
        #expect((try? await reader.getOrFetch(forKey: "k")) == nil, "\(change): the reader keeps the removed value")
        withExtendedLifetime(folder) {}
    }
}
