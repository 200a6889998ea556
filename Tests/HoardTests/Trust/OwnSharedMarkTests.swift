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

    /// A key removed again and again while the writer is busy: one removal is pending, and one mark
    /// of it waits for the section, not one per call (which the section would journal each).
    @Test func repeatedRemovalsOfAKeyWaitAsOneMark() async throws {
        let folder = TemporaryDirectory()
        let gate = DispatchSemaphore(value: 0)
        // A cache on the same store holds the writer: it serializes "block" there.
        let serializer = HoldingSerializer(gate: gate)
        let blocker = try folder.stringBuilder().serializer(serializer).build()
        let remover = try folder.stringBuilder().serializer(serializer).sharedLevel(GatedInvalidatingLevel()).build()
        await remover.flush()
        blocker["blocker"] = "block"
        for _ in 0..<1000 { remover.removeValue(forKey: "k") }
        let waiting = try #require(remover.disk).withState { $0.sharedMarksToJournal.count }
        gate.signal()
        await remover.flush()
        #expect(waiting <= 1, "\(waiting) marks wait to be journaled for one key")
        withExtendedLifetime(blocker) {}
    }

    /// Marks past their deadline, read from the journal (a process that catches up long after them,
    /// or opens the container then), hold nothing and are not kept: a process that writes no snapshot
    /// of its own would keep them for ever.
    @Test func marksPastTheirDeadlineAreNotKept() async throws {
        let folder = TemporaryDirectory()
        let writer = try folder.stringBuilder().build()
        writer["a"] = "a"
        await writer.flush()
        let until = Date().timeIntervalSince1970 - 1
        let marks = (0..<100).map { DiskJournal.Record.sharedPending(key: "key \($0)", until: until) }
        let path = folder.container().appendingPathComponent(ContainerFile.index).path
        try RawFiles.write(try RawFiles.read(path) + DiskJournal.encode([.begin] + marks + [.commit]), to: path)
        let reader = try folder.stringBuilder().sharedLevel(GatedInvalidatingLevel()).build(sharingStore: false)
        await reader.flush()
        let kept = try #require(reader.disk).withState { $0.peerSharedMarks.count }
        #expect(kept == 0, "\(kept) marks past their deadline kept")
        withExtendedLifetime(writer) {}
    }

    /// Live marks of many keys, learned by a process that writes no snapshot: once their deadline has
    /// passed, a later catch-up drops them.
    @Test func marksLearnedLiveAreDroppedOnceTheirDeadlinePassed() async throws {
        let folder = TemporaryDirectory()
        let writer = try folder.stringBuilder().build()
        writer["a"] = "a"
        await writer.flush()
        let until = Date().timeIntervalSince1970 + 0.5
        let marks = (0..<100).map { DiskJournal.Record.sharedPending(key: "key \($0)", until: until) }
        let path = folder.container().appendingPathComponent(ContainerFile.index).path
        try RawFiles.write(try RawFiles.read(path) + DiskJournal.encode([.begin] + marks + [.commit]), to: path)
        let reader = try folder.stringBuilder().sharedLevel(GatedInvalidatingLevel()).build(sharingStore: false)
        await reader.flush()
        let disk = try #require(reader.disk)
        #expect(disk.withState { $0.peerSharedMarks.count } == 100)
        #expect(await waitUntil { Date().timeIntervalSince1970 > until })
        // As many live marks of other keys, which the reader catches up with.
        let later = Date().timeIntervalSince1970 + 600
        let more = (0..<100).map { DiskJournal.Record.sharedPending(key: "other \($0)", until: later) }
        try RawFiles.write(try RawFiles.read(path) + DiskJournal.encode([.begin] + more + [.commit]), to: path)
        await reader.flush()
        let kept = disk.withState { $0.peerSharedMarks.count }
        #expect(kept == 100, "\(kept) marks kept: those past their deadline were not dropped")
        withExtendedLifetime(writer) {}
    }
}

/// A string serializer that waits for a gate before encoding "block": holds the writer.
private struct HoldingSerializer: CacheSerializer {
    let gate: DispatchSemaphore

    func serialize(_ value: String) throws -> Data {
        if value == "block" { gate.wait() }
        return Data(value.utf8)
    }

    func deserialize(_ data: Data) throws -> String { String(decoding: data, as: UTF8.self) }
}
