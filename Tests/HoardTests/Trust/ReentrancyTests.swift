import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Every delegate callback calling every public cache method, as a matrix.
///
/// Each cell builds a cache whose delegate, the first time the cell's callback arrives, calls the
/// cell's method on the cache (async ones are started, never waited on inside the callback). The
/// trigger runs on a plain thread and is waited on, from another plain thread, for at most
/// ``ReentrancyTests/secondsPerCell``: a deadlock fails the cell instead of hanging the run, and a
/// trap crashes it. The cache must then still take a set, serve it and flush.
@Suite(.timeLimit(.minutes(10)))
struct ReentrancyTests {
    init() { TestLog.install() }

    /// How long one step of a cell may take before it counts as a deadlock.
    ///
    /// Generous: a cell that deadlocks fails all the same, and under ThreadSanitizer, with every
    /// other suite running alongside on two cores, honest work has taken more than 15 s.
    static let secondsPerCell = 600.0

    /// The callback a cell reacts to, with the way it is triggered.
    enum Callback: String, CaseIterable, Sendable {
        /// `cache(_:didFailToFetchForKey:error:)`, after a blocking `getOrFetch` whose fetcher throws.
        case fetchFailure
        /// `cache(_:willEvictFromMemory:forKey:)`, from a set into a full memory level.
        case memoryEvictionBySet
        /// `cache(_:willEvictFromMemory:forKey:)`, from a fetched value stored into a full memory level.
        case memoryEvictionByFetch
        /// `cache(_:willEvictFromMemory:forKey:)`, from a disk hit copied into a full memory level.
        case memoryEvictionByDiskHit
        /// `cacheWillClearMemory(_:)`, from `clearMemory()`.
        case willClearMemory
        /// `cache(_:willEvictFromDiskForKey:)`, on the background writer, from a set into a full disk level.
        case diskEviction
        /// `cacheWillClearDisk(_:)`, from `clearDisk()`.
        case willClearDisk
        /// `cache(_:didFailToStoreValueForKey:error:)`, on the background writer, from a value the
        /// serializer rejects.
        case storeFailure
    }

    /// The public cache method a cell's callback calls.
    enum Call: String, CaseIterable, Sendable {
        case subscriptGet, subscriptSet, subscriptRemove, valueForKey, set, removeValue, removeAll
        case clearMemory, clearDisk, contains, allKeys, memoryCount, diskCount, diskBytes, statistics
        /// `flush()`, started in a task that the callback does not wait for.
        case flush
        /// `asyncGet(forKey:onComplete:)`, the callback form of `getOrFetch`.
        case asyncGet
        /// The blocking `getOrFetchAndWait(forKey:)`, documented as callable from a callback.
        case blockingGetOrFetch
        /// Reading and writing `maxRetryCount` and `delegate`.
        case settings
        /// `save(_:forKey:)`, started in a task that the callback does not wait for.
        case save
        /// `save(_:forKey:onComplete:)`, the callback form.
        case saveWithCallback
        /// The blocking `saveAndWait(_:forKey:)`.
        case saveAndWait
        /// The blocking `flushAndWait()`.
        case flushAndWait
        /// `entry(forKey:)`, and a `keyed` view's set and get.
        case entryAndKeyed

        /// Whether the call finishes later, signalling ``ReentrantDelegate/asyncDone``.
        var isAsync: Bool { self == .flush || self == .asyncGet || self == .save || self == .saveWithCallback }

        /// Whether the call waits for the background writer: documented as not callable from the
        /// writer's own callbacks (a disk eviction, a failed write), which would wait for themselves.
        var waitsForTheWriter: Bool { self == .saveAndWait || self == .flushAndWait }
    }

    @Test(arguments: Callback.allCases, Call.allCases)
    func aCallbackMayCallTheCache(callback: Callback, call: Call) async throws {
        if call.waitsForTheWriter && (callback == .diskEviction || callback == .storeFailure) { return }
        let folder = TemporaryDirectory()
        let delegate = ReentrantDelegate(callback: callback, call: call)
        var builder = folder.stringBuilder().serializer(PoisonSerializer()).delegate(delegate)
            .fetcher { key in
                if key == "fail" { throw PoisonSerializer.Rejected() }
                return "fetched \(key)"
            }
        switch callback {
        case .memoryEvictionBySet, .memoryEvictionByFetch, .memoryEvictionByDiskHit: builder = builder.maxRamCount(1)
        case .diskEviction: builder = builder.maxDiskCount(1)
        default: break
        }
        let cache = try builder.build()

        // Set up unarmed, so that evictions made while preparing are not the cell's callback.
        switch callback {
        case .memoryEvictionByDiskHit:
            cache["a"] = "1"
            cache["b"] = "2"  // evicts "a" from memory; it stays on disk
        case .memoryEvictionByFetch, .willClearMemory, .willClearDisk:
            cache["a"] = "1"
        default: break
        }
        await cache.flush()
        delegate.arm()

        let triggered = await finishesInTime(seconds: Self.secondsPerCell) {
            switch callback {
            case .fetchFailure: _ = try? blockingGet(cache, "fail")
            case .memoryEvictionBySet, .diskEviction:
                cache["a"] = "1"
                cache["b"] = "2"
            case .memoryEvictionByFetch: _ = try? blockingGet(cache, "b")
            case .memoryEvictionByDiskHit: _ = cache["a"]
            case .willClearMemory: cache.clearMemory()
            case .willClearDisk: cache.clearDisk()
            case .storeFailure: cache["p"] = "poison"
            }
        }
        // After a timeout a stuck thread may hold the cache's locks: touch the cache no more, not even
        // to release it, or the run would hang instead of failing this cell.
        func stuck(_ what: String) {
            Issue.record("\(what) (callback \(callback), call \(call))")
            Abandoned.keep(cache)
            Abandoned.keep(delegate)
        }
        guard triggered else { return stuck("the trigger did not return") }
        guard await signalled(delegate.reentered, within: Self.secondsPerCell) else {
            return stuck("the call made from the callback did not return")
        }
        if call.isAsync {
            guard await signalled(delegate.asyncDone, within: Self.secondsPerCell) else {
                return stuck("the async call started from the callback did not complete")
            }
        }

        // Still usable: a set is served, and a flush completes.
        if let problem = await stillUsable(cache, within: Self.secondsPerCell) { return stuck(problem) }
        #expect(delegate.firedCount >= 1)
    }
}

/// A delegate that, once armed, calls one cache method from the first callback of one kind.
private final class ReentrantDelegate: CacheDelegate, @unchecked Sendable {
    // Safe because `callback` and `call` never change, the semaphores are thread-safe, and `state`
    // is a lock.
    typealias Value = String

    let callback: ReentrancyTests.Callback
    let call: ReentrancyTests.Call
    /// Signalled once the call made from the callback has returned.
    let reentered = DispatchSemaphore(value: 0)
    /// Signalled once an async call started from the callback has completed.
    let asyncDone = DispatchSemaphore(value: 0)
    private let state = Protected((armed: false, fired: 0))

    init(callback: ReentrancyTests.Callback, call: ReentrancyTests.Call) {
        self.callback = callback
        self.call = call
    }

    func arm() { state.withLock { $0.armed = true } }

    /// How many times the cell's callback arrived once armed.
    var firedCount: Int { state.withLock { $0.fired } }

    private func react(_ kinds: Set<ReentrancyTests.Callback>, _ cache: Cache<String>, key: String?) {
        guard kinds.contains(callback) else { return }
        let isFirst = state.withLock { state -> Bool in
            guard state.armed else { return false }
            state.fired += 1
            return state.fired == 1
        }
        guard isFirst else { return }
        perform(on: cache, key: key ?? "a")
        reentered.signal()
    }

    private func perform(on cache: Cache<String>, key: String) {
        switch call {
        case .subscriptGet: _ = cache[key]
        case .subscriptSet: cache[key] = "set again"
        case .subscriptRemove: cache[key] = nil
        case .valueForKey: _ = cache.value(forKey: key)
        case .set: cache.set("set from a callback", forKey: "other")
        case .removeValue: cache.removeValue(forKey: key)
        case .removeAll: cache.removeAll()
        case .clearMemory: cache.clearMemory()
        case .clearDisk: cache.clearDisk()
        case .contains: _ = cache.contains(key)
        case .allKeys: _ = cache.allKeys
        case .memoryCount: _ = cache.memoryCount
        case .diskCount: _ = cache.diskCount
        case .diskBytes: _ = cache.diskBytes
        case .statistics: _ = cache.statistics
        case .flush:
            let done = asyncDone
            FetchTask.run {
                await cache.flush()
                done.signal()
            }
        case .asyncGet:
            let done = asyncDone
            cache.asyncGet(forKey: key) { _ in done.signal() }
        case .blockingGetOrFetch: _ = try? blockingGet(cache, key)
        case .settings:
            cache.maxRetryCount = cache.maxRetryCount + 1
            cache.delegate = cache.delegate
        case .save:
            let done = asyncDone
            FetchTask.run {
                try? await cache.save("saved from a callback", forKey: "other")
                done.signal()
            }
        case .saveWithCallback:
            let done = asyncDone
            cache.save("saved from a callback", forKey: "other") { _ in done.signal() }
        case .saveAndWait: try? cache.saveAndWait("saved from a callback", forKey: "other")
        case .flushAndWait: cache.flushAndWait()
        case .entryAndKeyed:
            _ = cache.entry(forKey: key)
            let keyed = cache.keyed { (number: Int) in "n\(number)" }
            keyed[1] = "keyed"
            _ = keyed[1]
        }
    }

    func cache(_ cache: Cache<String>, didFailToFetchForKey key: String, error: any Error) -> String? {
        react([.fetchFailure], cache, key: key)
        return nil
    }

    func cache(_ cache: Cache<String>, willEvictFromMemory value: String, forKey key: String) {
        react([.memoryEvictionBySet, .memoryEvictionByFetch, .memoryEvictionByDiskHit], cache, key: key)
    }

    func cacheWillClearMemory(_ cache: Cache<String>) { react([.willClearMemory], cache, key: nil) }

    func cache(_ cache: Cache<String>, willEvictFromDiskForKey key: String) {
        react([.diskEviction], cache, key: key)
    }

    func cacheWillClearDisk(_ cache: Cache<String>) { react([.willClearDisk], cache, key: nil) }

    func cache(_ cache: Cache<String>, didFailToStoreValueForKey key: String, error: any Error) {
        react([.storeFailure], cache, key: key)
    }
}
