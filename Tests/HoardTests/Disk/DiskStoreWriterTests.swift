import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// The background writer serializes a value before it takes the store's I/O lock: what may happen
/// meanwhile, and what must land.
///
/// Each serializer here stops on a gate until the test has made its move, so the order of events
/// is fixed; every wait is time-boxed, so a regression fails instead of hanging the run.
@Suite(.timeLimit(.minutes(10)))
struct DiskStoreWriterTests {
    init() { TestLog.install() }

    /// How long a step may take before it counts as stuck.
    static let seconds = 600.0
    static let key = DiskKey("k")

    /// A value whose serializer signals `serializing`, then waits for `release`.
    private func gatedValue(_ text: String, serializing: DispatchSemaphore, release: ThreadGate) -> PendingValue {
        PendingValue(
            value: text,
            serialize: {
                serializing.signal()
                release.wait()
                return Data(text.utf8)
            },
            expiresAt: .never
        )
    }

    private func payload(in store: DiskStore) -> String? {
        guard case .success(let entry) = store.readEntry(Self.key) else { return nil }
        return String(decoding: entry.payload, as: UTF8.self)
    }

    @Test func aClearWhileAValueIsBeingSerializedNeitherWaitsForItNorLetsItLand() async throws {
        let folder = TemporaryDirectory()
        let store = try DiskStore(at: folder.container(), options: .init(capacity: 10, policy: .lru))
        let serializing = DispatchSemaphore(value: 0)
        let release = ThreadGate()
        defer { release.open() }
        _ = store.enqueueWrite(
            Self.key,
            value: gatedValue("old", serializing: serializing, release: release),
            observer: nil
        )
        guard await signalled(serializing, within: Self.seconds) else {
            Issue.record("the writer did not start serializing")
            return
        }

        // The writer is inside the serializer: a clear does not wait for it.
        let cleared = await finishesInTime(seconds: Self.seconds) { store.removeAll() }
        guard cleared else {
            Issue.record("removeAll() waited for a serializer")
            release.open()
            Abandoned.keep(store)
            return
        }
        release.open()
        await store.flush()
        #expect(payload(in: store) == nil)
        #expect(!store.contains(Self.key))
        #expect(store.count == 0)
        #expect(store.invariantViolations() == [])
    }

    @Test func aValueReplacedWhileBeingSerializedLandsBeforeAFlushQueuedAheadOfTheNewerValue() async throws {
        let folder = TemporaryDirectory()
        let store = try DiskStore(at: folder.container(), options: .init(capacity: 10, policy: .lru))
        let serializingOld = DispatchSemaphore(value: 0)
        let releaseOld = ThreadGate()
        let serializingNew = DispatchSemaphore(value: 0)
        let releaseNew = ThreadGate()
        defer {
            releaseOld.open()
            releaseNew.open()
        }
        _ = store.enqueueWrite(
            Self.key,
            value: gatedValue("old", serializing: serializingOld, release: releaseOld),
            observer: nil
        )
        guard await signalled(serializingOld, within: Self.seconds) else {
            Issue.record("the writer did not start serializing")
            return
        }

        // While "old" is being serialized, a flush queues, then a newer value of the same key.
        let flushed = DispatchSemaphore(value: 0)
        FetchTask.run {
            await store.flush()
            flushed.signal()
        }
        let flushIsQueued = await waitUntil {
            store.withState { state in
                state.queue[state.queueHead...].contains { item in
                    if case .flush = item { return true }
                    return false
                }
            }
        }
        #expect(flushIsQueued)
        _ = store.enqueueWrite(
            Self.key,
            value: gatedValue("new", serializing: serializingNew, release: releaseNew),
            observer: nil
        )
        releaseOld.open()

        // The flush was queued after "old" was set: "old" is on disk when it returns, and "new",
        // queued after the flush, is still being serialized.
        guard await signalled(flushed, within: Self.seconds) else {
            Issue.record("the flush did not return")
            return
        }
        #expect(payload(in: store) == "old")
        guard await signalled(serializingNew, within: Self.seconds) else {
            Issue.record("the newer value was not serialized")
            return
        }
        if case .pending(let value) = store.lookup(Self.key) {
            #expect(value.value as? String == "new")
        } else {
            Issue.record("readers do not see the newer value")
        }

        // Then the newer value wins.
        releaseNew.open()
        await store.flush()
        #expect(payload(in: store) == "new")
        #expect(store.count == 1)
        #expect(store.invariantViolations() == [])
    }
}
