import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// A serializer that calls back into its own cache, from `serialize` and from `deserialize`.
///
/// Each cell builds a cache whose serializer, the first time it meets the value `"reenter"` once
/// armed, calls the cell's method on the cache (`flush()` is started in a task, never waited on from
/// the serializer). As in ``ReentrancyTests``, the trigger runs on a plain thread and every wait is
/// time-boxed from another plain thread: a deadlock fails the cell instead of hanging the run. The
/// cache must then still take a set, serve it and flush, and what landed on disk must follow the
/// order of the calls.
@Suite(.timeLimit(.minutes(10)))
struct SerializerReentrancyTests {
    init() { TestLog.install() }

    /// How long one step of a cell may take before it counts as a deadlock.
    static let secondsPerStep = ReentrancyTests.secondsPerCell

    /// Where the serializer meets the value, and so on which thread it calls back.
    enum Side: String, CaseIterable, Sendable {
        /// `serialize`, on the background writer, for a set.
        case serialize
        /// `serialize`, on the thread of the set: with `maxRamCost` a set measures its value first.
        case serializeForRamCost
        /// `deserialize`, on the reader's thread, for a disk hit (memory off).
        case deserialize
    }

    /// The cache method the serializer calls.
    enum Call: String, CaseIterable, Sendable {
        case removeAll, clearDisk, set, removeValue
        /// `flush()`, started in a task that the serializer does not wait for.
        case flush
    }

    @Test(arguments: Side.allCases, Call.allCases)
    func aSerializerMayCallItsOwnCache(side: Side, call: Call) async throws {
        let folder = TemporaryDirectory()
        let probe = SerializerProbe(side: side, call: call)
        var builder = folder.stringBuilder().serializer(ReentrantSerializer(probe: probe))
        switch side {
        case .serialize: break
        case .serializeForRamCost: builder = builder.maxRamCost(1 << 20)
        case .deserialize: builder = builder.maxRamCount(0)
        }
        let cache = try builder.build()
        probe.attach(cache)
        if side == .deserialize {
            cache["k"] = "reenter"
            await cache.flush()
        }
        probe.arm()

        let triggered = await finishesInTime(seconds: Self.secondsPerStep) {
            switch side {
            case .serialize, .serializeForRamCost: cache["k"] = "reenter"
            case .deserialize: _ = cache["k"]
            }
        }
        // After a timeout a stuck thread may hold the cache's locks: touch the cache no more.
        func stuck(_ what: String) {
            Issue.record("\(what) (side \(side), call \(call))")
            Abandoned.keep(cache)
            Abandoned.keep(probe)
        }
        guard triggered else { return stuck("the trigger did not return") }
        guard await signalled(probe.reentered, within: Self.secondsPerStep) else {
            return stuck("the call made from the serializer did not return")
        }
        if call == .flush {
            guard await signalled(probe.asyncDone, within: Self.secondsPerStep) else {
                return stuck("the flush started from the serializer did not complete")
            }
        }

        // Still usable: a set is served, and a flush completes.
        if let problem = await stillUsable(cache, within: Self.secondsPerStep) { return stuck(problem) }

        #expect(probe.firedCount == 1)
        #expect(cache.disk?.invariantViolations() == [])
        guard side == .serialize, let disk = cache.disk else { return }
        // The writer was serializing "k" when the call came: a clear or a removal that followed the
        // set wins over it, and a set of another key lands beside it.
        switch call {
        case .removeAll, .clearDisk, .removeValue: #expect(!disk.contains(DiskKey("k")))
        case .set:
            #expect(disk.contains(DiskKey("k")))
            #expect(disk.contains(DiskKey("other")))
        case .flush: #expect(disk.contains(DiskKey("k")))
        }
    }
}

/// What a ``ReentrantSerializer`` calls, on which cache, and what it has done.
private final class SerializerProbe: Sendable {
    let side: SerializerReentrancyTests.Side
    let call: SerializerReentrancyTests.Call
    /// Signalled once the call made from the serializer has returned.
    let reentered = DispatchSemaphore(value: 0)
    /// Signalled once a flush started from the serializer has completed.
    let asyncDone = DispatchSemaphore(value: 0)

    private struct State: Sendable {
        weak var cache: Cache<String>?
        var isArmed = false
        var fired = 0
    }

    private let state = Protected(State())

    init(side: SerializerReentrancyTests.Side, call: SerializerReentrancyTests.Call) {
        self.side = side
        self.call = call
    }

    /// The cache to call; held weakly, since the cache holds its serializer.
    func attach(_ cache: Cache<String>) { state.withLock { $0.cache = cache } }

    func arm() { state.withLock { $0.isArmed = true } }

    /// How many times the serializer called the cache.
    var firedCount: Int { state.withLock { $0.fired } }

    /// Calls the cell's method the first time the armed serializer meets the value `"reenter"`.
    func reenter(_ value: String) {
        guard value == "reenter" else { return }
        let cache = state.withLock { state -> Cache<String>? in
            guard state.isArmed, state.fired == 0 else { return nil }
            state.fired += 1
            return state.cache
        }
        guard let cache else { return }
        switch call {
        case .removeAll: cache.removeAll()
        case .clearDisk: cache.clearDisk()
        case .set: cache["other"] = "plain"
        case .removeValue: cache.removeValue(forKey: "k")
        case .flush:
            let done = asyncDone
            FetchTask.run {
                await cache.flush()
                done.signal()
            }
        }
        reentered.signal()
    }
}

/// A string serializer that hands the value `"reenter"` to its probe on the way in or out.
private struct ReentrantSerializer: CacheSerializer {
    let probe: SerializerProbe

    func serialize(_ value: String) throws -> Data {
        // With `maxRamCost` the set itself serializes, on its own thread; otherwise only the writer does.
        if probe.side != .deserialize { probe.reenter(value) }
        return Data(value.utf8)
    }

    func deserialize(_ data: Data) throws -> String {
        let value = String(decoding: data, as: UTF8.self)
        if probe.side == .deserialize { probe.reenter(value) }
        return value
    }
}
