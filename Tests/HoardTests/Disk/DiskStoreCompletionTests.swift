import Dispatch
import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// A write's completion (what `save` waits for): called once the value is in its file, or once a
/// later change of the key replaced it first.
@Suite struct DiskStoreCompletionTests {
    private func value(_ text: String, gate: DispatchSemaphore? = nil) -> PendingValue {
        PendingValue(
            value: text,
            serialize: {
                gate?.wait()
                return Data(text.utf8)
            },
            expiresAt: .never
        )
    }

    private func payload(_ folder: TemporaryDirectory, _ key: String) throws -> String? {
        let path = folder.container().appendingPathComponent(DiskKey(key).fileName).path
        guard RawFiles.exists(path) else { return nil }
        return String(decoding: try EntryFormat.decode(RawFiles.read(path)).payload, as: UTF8.self)
    }

    /// Holds the writer inside the serializer of an unrelated key until `gate` is signalled.
    private func blockWriter(_ store: DiskStore, gate: DispatchSemaphore) {
        _ = store.enqueueWrite(DiskKey("blocker"), value: value("blocker", gate: gate), observer: nil)
    }

    @Test func aWriteReplacedBeforeItLandsCompletesWhenTheNewerOneDoes() async throws {
        let folder = TemporaryDirectory()
        let store = try DiskStore(at: folder.container(), options: .init(capacity: 100, policy: .lru))
        let gate = DispatchSemaphore(value: 0)
        blockWriter(store, gate: gate)
        let completed = DispatchSemaphore(value: 0)
        let results = Protected<[Result<Void, CacheError>]>([])
        _ = store.enqueueWrite(DiskKey("k"), value: value("first"), observer: nil) { result in
            results.withLock { $0.append(result) }
            completed.signal()
        }
        _ = store.enqueueWrite(DiskKey("k"), value: value("second"), observer: nil)
        #expect(results.withLock { $0.isEmpty })
        gate.signal()
        #expect(await signalled(completed, within: 600))
        #expect(results.withLock { $0.count } == 1)
        #expect((try? results.withLock { $0 }.first?.get()) != nil)
        #expect(try payload(folder, "k") == "second")
    }

    @Test func aWriteAClearDropsCompletes() async throws {
        let folder = TemporaryDirectory()
        let store = try DiskStore(at: folder.container(), options: .init(capacity: 100, policy: .lru))
        let gate = DispatchSemaphore(value: 0)
        blockWriter(store, gate: gate)
        let completed = DispatchSemaphore(value: 0)
        _ = store.enqueueWrite(DiskKey("k"), value: value("v"), observer: nil) { _ in completed.signal() }
        store.removeAll()
        #expect(await signalled(completed, within: 600))
        gate.signal()
        await store.flush()
        #expect(try payload(folder, "k") == nil)
    }

    @Test func aFailedWriteCompletesWithItsError() async throws {
        let folder = TemporaryDirectory()
        let store = try DiskStore(at: folder.container(), options: .init(capacity: 100, policy: .lru))
        struct Refused: Error {}
        let outcome = await withCheckedContinuation { continuation in
            _ = store.enqueueWrite(
                DiskKey("k"),
                value: PendingValue(value: "v", serialize: { throw Refused() }, expiresAt: .never),
                observer: nil
            ) { continuation.resume(returning: $0) }
        }
        #expect(throws: CacheError.serializationFailed) { try outcome.get() }
    }
}
