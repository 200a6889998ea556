import Dispatch
import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Where two of the disk store's capabilities meet: a clear × a write the writer has taken.
@Suite struct DiskSeamTests {
    /// How long a test waits for a writer (the disk's, or the shared level's) to reach the point it holds.
    ///
    /// Milliseconds when the tests run alone; a whole parallel run under ThreadSanitizer kept a
    /// writer from getting there for over two minutes. Reaching it ends the wait at once.
    private static let patience = 600.0

    /// A write whose serializer is running (the writer took it) when a clear drops it: its
    /// completion (what `save` waits for) is called once, as `enqueueWrite` promises, not once by
    /// the clear and again by the writer.
    @Test func aWriteTakenByTheWriterWhenAClearDropsItCompletesOnce() async throws {
        let folder = TemporaryDirectory()
        let store = try DiskStore(at: folder.container(), options: .init(capacity: 100, policy: .lru))
        let started = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        let calls = Protected(0)
        _ = store.enqueueWrite(
            DiskKey("k"),
            value: PendingValue(
                value: "v",
                serialize: {
                    started.signal()
                    gate.wait()
                    return Data("v".utf8)
                },
                expiresAt: .never
            ),
            observer: nil
        ) { _ in calls.withLock { $0 += 1 } }
        // The writer has taken the write: its serializer runs.
        #expect(await signalled(started, within: Self.patience))
        await onPlainThread { store.removeAll() }
        gate.signal()
        await store.flush()
        #expect(calls.withLock { $0 } == 1, "the completion of one write was called more than once")
        #expect(!RawFiles.exists(folder.container().appendingPathComponent(DiskKey("k").fileName).path))
    }

    /// A write whose serializer fails after a clear dropped it (the writer had taken it): the clear
    /// answered its caller with success, so its cache does not hear that it failed to store, as it
    /// would not have for a write the clear dropped before the writer took it.
    @Test func aWriteAClearDroppedIsNotReportedAsFailedWhenItsSerializerThenFails() async throws {
        let folder = TemporaryDirectory()
        let store = try DiskStore(at: folder.container(), options: .init(capacity: 100, policy: .lru))
        let recorder = EvictionRecorder()
        let started = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        let answers = Protected<[Result<Void, CacheError>]>([])
        struct Refused: Error {}
        _ = store.enqueueWrite(
            DiskKey("k"),
            value: PendingValue(
                value: "v",
                serialize: {
                    started.signal()
                    gate.wait()
                    throw Refused()
                },
                expiresAt: .never
            ),
            observer: recorder
        ) { result in answers.withLock { $0.append(result) } }
        // The writer has taken the write: its serializer runs.
        #expect(await signalled(started, within: Self.patience))
        await onPlainThread { store.removeAll() }
        gate.signal()
        await store.flush()  // the writer has dealt with the dropped write
        let answered = answers.withLock { $0 }
        #expect(answered.count == 1)
        #expect((try? answered.first?.get()) != nil, "the clear answers the write it drops with success")
        #expect(
            recorder.failed.withLock { $0 }.isEmpty,
            "the write was answered with success, yet its cache heard that it failed to store"
        )
        #expect(!RawFiles.exists(folder.container().appendingPathComponent(DiskKey("k").fileName).path))
    }

    /// A write a clear dropped while the writer held it, whose section then cannot catch up with
    /// other processes: the clear answered it with success, and it changes no file either way, so
    /// its cache does not hear that it failed to store.
    @Test func aWriteAClearDroppedIsNotReportedAsFailedWhenItsSectionIsStale() async throws {
        let folder = TemporaryDirectory()
        let store = try DiskStore(at: folder.container(), options: .init(capacity: 100, policy: .lru))
        let recorder = EvictionRecorder()
        let started = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        let answers = Protected<[Result<Void, CacheError>]>([])
        _ = store.enqueueWrite(
            DiskKey("k"),
            value: PendingValue(
                value: "v",
                serialize: {
                    started.signal()
                    gate.wait()
                    return Data("v".utf8)
                },
                expiresAt: .never
            ),
            observer: recorder
        ) { result in answers.withLock { $0.append(result) } }
        #expect(await signalled(started, within: Self.patience))
        await onPlainThread { store.removeAll() }
        let path = store.directory.path
        SharedContainer.testHooks.setCatchUpFails(true, at: path)
        defer { SharedContainer.testHooks.setCatchUpFails(false, at: path) }
        gate.signal()
        await store.flush()
        let answered = answers.withLock { $0 }
        #expect(answered.count == 1)
        #expect((try? answered.first?.get()) != nil, "the clear answers the write it drops with success")
        #expect(
            recorder.failed.withLock { $0 }.isEmpty,
            "the write was answered with success, yet its cache heard that it failed to store"
        )
    }

    /// The user-facing side of the same seam: `save` with a shared level waits for its shared write.
    ///
    /// ("or for a clear queued after it, which drops it"). A clear that drops the disk
    /// write while its serializer runs answers the disk half twice, so `save` returned before its
    /// shared write (in flight, not dropped by the clear) was made, and missed its failure.
    @Test func aSaveWaitsForItsSharedWriteWhenAClearDropsItsDiskWriteInTheSerializer() async throws {
        let folder = TemporaryDirectory()
        let serializer = WriterGatedSerializer()
        let shared = GatedFailingSharedLevel()
        let cache = try folder.stringBuilder().serializer(serializer).sharedLevel(shared).build()
        let store = try #require(cache.disk)
        serializer.store.withLock { $0 = store }
        let saving = Task { () -> Result<Void, any Error> in
            do {
                try await cache.save("v", forKey: "k")
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        // The disk writer is in the serializer of the save's write; the shared write is in flight.
        #expect(await signalled(serializer.started, within: Self.patience))
        #expect(await signalled(shared.started, within: Self.patience))
        await onPlainThread { cache.removeAll() }
        serializer.gate.signal()
        await store.flush()  // the writer has dealt with the dropped write
        shared.gate.signal()  // the shared write now fails
        let result = await saving.value
        #expect(throws: (any Error).self, "save returned success although its shared write failed") {
            try result.get()
        }
    }
}

/// A string serializer that holds the disk level's background writer (only it) in its first
/// encoding until `gate` is signalled.
private final class WriterGatedSerializer: CacheSerializer, Sendable {
    let store = Protected<DiskStore?>(nil)
    let started = DispatchSemaphore(value: 0)
    let gate = DispatchSemaphore(value: 0)
    private let held = Protected(false)

    func serialize(_ value: String) throws -> Data {
        let onWriter = store.withLock { $0?.isRunningOnWriter == true }
        if onWriter
            && held.withLock({ done in
                defer { done = true }; return !done
            })
        {
            started.signal()
            gate.wait()
        }
        return Data(value.utf8)
    }

    func deserialize(_ data: Data) throws -> String { String(decoding: data, as: UTF8.self) }
}

/// A shared level whose writes wait for `gate`, then fail like a server that went down.
private final class GatedFailingSharedLevel: CacheLevel, Sendable {
    let started = DispatchSemaphore(value: 0)
    let gate = DispatchSemaphore(value: 0)

    func get(_ key: String) async throws -> Data { throw CacheError.notFound(key: key) }

    func set(_ value: Data, forKey key: String) async throws {
        started.signal()
        let gate = self.gate
        await onPlainThread { gate.wait() }
        throw CacheError.io("The gated shared level is down.")
    }

    func removeValue(forKey key: String) async throws {}
    func clear() async {}
    func onMemoryWarning() {}
}
