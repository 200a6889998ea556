import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Calls of a cache made from inside each piece of user code it runs.
///
/// Every call that does not block on the cache's own writer, from its serializer (both ways), each
/// delegate method, the fetcher and an `events` consumer. None may hang, and the call must have run.
///
/// The blocking forms (`flushAndWait`, `saveAndWait`, `getOrFetchAndWait`) are left out of the
/// contexts that run on the writer (`serialize`, disk evictions, failed stores): they would wait for
/// the writer they run on, as the Concurrency article says.
@Suite struct ReentrancyMatrixTests {
    /// Where the user code runs.
    enum Context: String, CaseIterable, Sendable {
        case serialize, deserialize
        case willEvictFromMemory, willEvictFromDisk, willClearMemory, willClearDisk
        case didFailToFetch, didFailToStore
        case fetcher, eventsConsumer
    }

    /// What the user code calls on its own cache.
    enum Call: String, CaseIterable, Sendable {
        case set, read, removeValue, removeAll, clearMemory, clearDisk, removeExpired
        case contains, entry, allKeys, counts, statistics, asyncGet, saveWithCallback, flushInTask

        func run(on cache: Cache<String>) {
            switch self {
            case .set: cache["other"] = "x"
            case .read: _ = cache["other"]
            case .removeValue: cache.removeValue(forKey: "other")
            case .removeAll: cache.removeAll()
            case .clearMemory: cache.clearMemory()
            case .clearDisk: cache.clearDisk()
            case .removeExpired: cache.removeExpired()
            case .contains: _ = cache.contains("other")
            case .entry: _ = cache.entry(forKey: "other")
            case .allKeys: _ = cache.allKeys
            case .counts: _ = (cache.memoryCount, cache.diskCount)
            case .statistics: _ = cache.statistics
            case .asyncGet: cache.asyncGet(forKey: "other") { _ in }
            case .saveWithCallback: cache.save("x", forKey: "saved") { _ in }
            case .flushInTask: Task { await cache.flush() }
            }
        }
    }

    /// Runs one armed call, once, from whichever piece of user code fires first.
    final class Probe: @unchecked Sendable {
        // Safe because `armed` and `fired` are only touched while holding `lock`.
        private let lock = NSLock()
        private var armed: (Cache<String>, Call)?
        private var fired = false
        let call: Call

        init(_ call: Call) { self.call = call }

        func arm(_ cache: Cache<String>) { lock.withLock { armed = (cache, call) } }

        func fire() {
            let target = lock.withLock { () -> (Cache<String>, Call)? in
                defer { armed = nil }
                return armed
            }
            guard let (cache, call) = target else { return }
            call.run(on: cache)
            lock.withLock { fired = true }
        }

        var hasFired: Bool { lock.withLock { fired } }
    }

    /// A string serializer that fires the probe from both directions, and fails on "bad".
    struct ProbingSerializer: CacheSerializer {
        let probe: Probe
        let context: Context

        func serialize(_ value: String) throws -> Data {
            if context == .serialize { probe.fire() }
            if value == "bad" { throw CocoaError(.coderInvalidValue) }
            return Data(value.utf8)
        }

        func deserialize(_ data: Data) throws -> String {
            if context == .deserialize { probe.fire() }
            return String(decoding: data, as: UTF8.self)
        }
    }

    /// A delegate that fires the probe from the method of its context.
    final class ProbingDelegate: CacheDelegate, Sendable {
        let probe: Probe
        let context: Context

        init(probe: Probe, context: Context) {
            self.probe = probe
            self.context = context
        }

        func cache(_ cache: Cache<String>, didFailToFetchForKey key: String, error: any Error) -> String? {
            if context == .didFailToFetch { probe.fire() }
            return nil
        }
        func cache(_ cache: Cache<String>, willEvictFromMemory value: String, forKey key: String) {
            if context == .willEvictFromMemory { probe.fire() }
        }
        func cacheWillClearMemory(_ cache: Cache<String>) {
            if context == .willClearMemory { probe.fire() }
        }
        func cache(_ cache: Cache<String>, willEvictFromDiskForKey key: String) {
            if context == .willEvictFromDisk { probe.fire() }
        }
        func cacheWillClearDisk(_ cache: Cache<String>) {
            if context == .willClearDisk { probe.fire() }
        }
        func cache(_ cache: Cache<String>, didFailToStoreValueForKey key: String, error: any Error) {
            if context == .didFailToStore { probe.fire() }
        }
    }

    /// Makes the cache run the user code of `context`, with `probe` armed.
    private static func trigger(_ context: Context, _ probe: Probe, _ folder: TemporaryDirectory) async throws {
        let delegate = ProbingDelegate(probe: probe, context: context)
        let cache = try CacheBuilder<String>(serializer: ProbingSerializer(probe: probe, context: context))
            .containerName("c").directory(folder.url)
            .maxRamCount(1).maxDiskCount(context == .willEvictFromDisk ? 1 : 100)
            .fetcher { key in
                if context == .fetcher { probe.fire() }
                if context == .didFailToFetch { throw CacheError.notFound }
                return "fetched \(key)"
            }
            .delegate(delegate)
            .build()
        switch context {
        case .serialize, .willEvictFromMemory, .willEvictFromDisk:
            probe.arm(cache)
            cache["a"] = "1"
            cache["b"] = "2"
            await cache.flush()
        case .deserialize:
            cache["a"] = "1"
            cache["b"] = "2"  // memory holds one value: "a" is on disk only
            await cache.flush()
            probe.arm(cache)
            _ = cache["a"]
        case .willClearMemory, .willClearDisk:
            cache["a"] = "1"
            probe.arm(cache)
            cache.removeAll()
        case .didFailToFetch, .fetcher:
            probe.arm(cache)
            _ = try? await cache.getOrFetch(forKey: "f")
        case .didFailToStore:
            probe.arm(cache)
            cache["a"] = "bad"
            await cache.flush()
        case .eventsConsumer:
            let events = cache.events
            let consumer = Task {
                for await _ in events {
                    probe.fire()
                    break
                }
            }
            probe.arm(cache)
            cache["a"] = "1"
            await consumer.value
        }
        await cache.flush()
        withExtendedLifetime(delegate) {}
    }

    /// One case at a time: 150 caches at once, beside the rest of a sanitized run, starved each
    /// other past the hang guard.
    @Test(.serialized, arguments: Context.allCases, Call.allCases)
    func aCallFromUserCodeDoesNotHang(context: Context, call: Call) async throws {
        let folder = TemporaryDirectory()
        let probe = Probe(call)
        let done = DispatchSemaphore(value: 0)
        let failure = Protected<(any Error)?>(nil)
        Task.detached {
            do {
                try await Self.trigger(context, probe, folder)
            } catch {
                failure.withLock { $0 = error }
            }
            done.signal()
        }
        // A hang guard, not a speed limit: a deadlock never signals. Generous, for the minutes a
        // sanitized run beside the multi-process trials can stall every thread.
        #expect(await signalled(done, within: 600), "calling \(call) from \(context) hung")
        #expect(failure.withLock { $0 } == nil)
        #expect(probe.hasFired, "\(context) never ran the call")
    }
}

/// The blocking forms called on the writer they would wait for stop the program with a message
/// instead of hanging it.
@Suite struct BlockingFormsOnTheWriterTests {
    /// A serializer that calls `flushAndWait()` or `saveAndWait` on the cache it serves.
    final class WaitingSerializer: CacheSerializer, @unchecked Sendable {
        // Safe because `cache` is set once, before any value is set, and only read afterwards.
        var cache: Cache<String>?
        let savesInstead: Bool

        init(savesInstead: Bool) { self.savesInstead = savesInstead }

        func serialize(_ value: String) throws -> Data {
            if savesInstead {
                try cache?.saveAndWait("inner", forKey: "inner")
            } else {
                cache?.flushAndWait()
            }
            return Data(value.utf8)
        }

        func deserialize(_ data: Data) throws -> String { String(decoding: data, as: UTF8.self) }
    }

    static func run(savesInstead: Bool) async throws {
        let folder = TemporaryDirectory.forExitTest()
        let serializer = WaitingSerializer(savesInstead: savesInstead)
        let cache = try CacheBuilder<String>(serializer: serializer).containerName("c").directory(folder.url)
            .build()
        serializer.cache = cache
        cache["a"] = "1"
        await cache.flush()
    }

    @Test func flushAndWaitFromASerializerTraps() async {
        await #expect(processExitsWith: .failure) { try await BlockingFormsOnTheWriterTests.run(savesInstead: false) }
        TemporaryDirectory.removeExitTestFolders()
    }

    @Test func saveAndWaitFromASerializerTraps() async {
        await #expect(processExitsWith: .failure) { try await BlockingFormsOnTheWriterTests.run(savesInstead: true) }
        TemporaryDirectory.removeExitTestFolders()
    }

    @Test func flushAndWaitFromADeserializerIsAllowed() throws {
        let folder = TemporaryDirectory()
        let cache = try CacheBuilder<String>(serializer: FlushingDeserializer()).containerName("c")
            .directory(folder.url).maxRamCount(0).build()
        FlushingDeserializer.cache.withLock { $0 = cache }
        cache["a"] = "1"
        cache.flushAndWait()
        #expect(cache["a"] == "1")
        #expect(FlushingDeserializer.flushes.withLock { $0 } == 1)
    }

    /// Flushes its cache, blocking, from `deserialize`: it runs on the reader's thread.
    struct FlushingDeserializer: CacheSerializer {
        static let cache = Protected<Cache<String>?>(nil)
        static let flushes = Protected(0)

        func serialize(_ value: String) throws -> Data { Data(value.utf8) }

        func deserialize(_ data: Data) throws -> String {
            if let cache = Self.cache.withLock({ $0 }) {
                cache.flushAndWait()
                Self.flushes.withLock { $0 += 1 }
            }
            return String(decoding: data, as: UTF8.self)
        }
    }
}
