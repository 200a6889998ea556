import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Where `serveStaleOnFetchFailure` meets the removals: a value removed (by this cache, by another
/// cache on its container, by another process, by a clear) is not there to be served stale when the
/// fetch then fails.
@Suite(.timeLimit(.minutes(10)), .validatesCacheInvariants)
struct StaleRemovalSeamTests {
    private struct Down: Error {}

    /// A cache holding an expired "old" in memory and on disk, whose fetcher fails.
    private static func staleCache(
        _ folder: TemporaryDirectory,
        _ clock: ManualClock,
        fetcher: (@Sendable (String) async throws -> String)? = nil
    ) async throws -> Cache<String> {
        let cache = try folder.stringBuilder().clock(clock.read).serveStaleOnFetchFailure(true)
            .fetcher(fetcher ?? { _ in throw Down() }).build()
        cache.set("old", forKey: "k", expiry: .seconds(5))
        await cache.flush()
        clock.advance(by: 10)
        #expect(cache.entry(forKey: "k")?.isExpired == true)
        // Served stale while it is there: what the tests below take away.
        if fetcher == nil { #expect(try await cache.getOrFetch(forKey: "k") == "old") }
        return cache
    }

    /// The removal of another cache on the same container reaches this one's expired copy.
    @Test func aValueAnotherCacheOnTheContainerRemovedIsNotServedStale() async throws {
        let folder = TemporaryDirectory()
        let clock = ManualClock()
        let cache = try await Self.staleCache(folder, clock)
        let other = try folder.stringBuilder().clock(clock.read).build()
        other.removeValue(forKey: "k")
        await other.flush()
        let got = await Task { try await cache.getOrFetch(forKey: "k") }.result
        #expect((try? got.get()) == nil, "served \(got) after another cache removed the key")
    }

    /// A value another process removed, once this process has read the journal (`flush()`), is not
    /// served stale from the expired copy memory kept.
    @Test func aValueAnotherProcessRemovedIsNotServedStaleOnceTheJournalIsRead() async throws {
        let folder = TemporaryDirectory()
        let clock = ManualClock()
        let cache = try await Self.staleCache(folder, clock)
        let other = try folder.stringBuilder().clock(clock.read).build(sharingStore: false)
        other.removeValue(forKey: "k")
        await other.flush()
        await cache.flush()
        let got = await Task { try await cache.getOrFetch(forKey: "k") }.result
        #expect((try? got.get()) == nil, "served \(got) after another process removed the key")
    }

    /// A removal or a clear made while the fetch runs leaves nothing to serve when it fails.
    @Test(arguments: ["removeValue", "removeAll", "clearBoth"])
    func aValueRemovedWhileTheFetchRunsIsNotServedStale(_ removal: String) async throws {
        let folder = TemporaryDirectory()
        let clock = ManualClock()
        let started = Counter()
        let gate = Gate()
        let cache = try await Self.staleCache(folder, clock) { _ in
            started.increment()
            try await gate.wait()
            throw Down()
        }
        let caller = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { started.value == 1 })
        switch removal {
        case "removeValue": cache.removeValue(forKey: "k")
        case "removeAll": cache.removeAll()
        default:
            cache.clearMemory()
            cache.clearDisk()
        }
        gate.open()
        let got = await caller.result
        #expect((try? got.get()) == nil, "\(removal): served \(got)")
        #expect(cache.entry(forKey: "k") == nil)
    }
}

extension StaleRemovalSeamTests {
    /// A value another process removed is not served stale from the expired copy memory kept, once
    /// the read found its file gone (before this process read the journal).
    @Test func aValueAnotherProcessRemovedIsNotServedStaleOnceItsFileIsFoundGone() async throws {
        let folder = TemporaryDirectory()
        let clock = ManualClock()
        let cache = try await Self.staleCache(folder, clock)
        let other = try folder.stringBuilder().clock(clock.read).build(sharingStore: false)
        other.removeValue(forKey: "k")
        await other.flush()
        #expect(folder.entryFiles().isEmpty)
        let got = await Task { try await cache.getOrFetch(forKey: "k") }.result
        #expect((try? got.get()) == nil, "served \(got) after another process removed the key")
    }
}

/// Where `serveStaleOnFetchFailure` meets coherence: a copy an invalidation or a loss of tracking
/// dropped is not served stale when the shared level and the fetcher then fail.
extension StaleRemovalSeamTests {
    private static func coherentStaleCache(
        _ folder: TemporaryDirectory,
        _ level: FakeInvalidatingLevel,
        _ clock: ManualClock,
        duringOutage: CacheCoherence.Outage = .serveLocalCopies
    ) async throws -> Cache<String> {
        let cache = try folder.stringBuilder().clock(clock.read).serveStaleOnFetchFailure(true)
            .sharedLevel(level)
            .coherence(.invalidations(maxLocalAge: .seconds(86_400), duringOutage: duringOutage))
            .fetcher { _ in throw Down() }.build()
        #expect(await waitUntil { !cache.isClearingDisk })
        level.announce(.tracking)
        #expect(await waitUntil { cache.isCoherent })
        cache.set("old", forKey: "k", expiry: .seconds(5))
        await cache.flush()
        #expect(await waitUntil { !cache.isClearingDisk })
        clock.advance(by: 10)
        #expect(cache.entry(forKey: "k")?.isExpired == true)
        // Served stale while it is there: what the tests below take away.
        #expect(try await cache.getOrFetch(forKey: "k") == "old")
        return cache
    }

    @Test(arguments: [false, true])
    func aValueAnotherInstanceRemovedIsNotServedStaleOnceAnnounced(_ sharedIsDown: Bool) async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let clock = ManualClock()
        let cache = try await Self.coherentStaleCache(folder, level, clock)
        try await level.store.removeValue(forKey: "k")
        level.announce(.keys(["k"]))
        #expect(await waitUntil { cache.echoChecksUnderWay == 0 })
        level.store.setFailing(sharedIsDown)
        let got = await Task { try await cache.getOrFetch(forKey: "k") }.result
        #expect((try? got.get()) == nil, "served \(got) after another instance removed the key")
    }

    @Test(arguments: [CacheCoherence.Outage.serveLocalCopies, .bypassLocalCopies])
    func aCopyDroppedForALossOfTrackingIsNotServedStale(_ outage: CacheCoherence.Outage) async throws {
        let folder = TemporaryDirectory()
        let level = FakeInvalidatingLevel()
        let clock = ManualClock()
        let cache = try await Self.coherentStaleCache(folder, level, clock, duringOutage: outage)
        // Another instance removes the key while tracking is lost: the removal goes unannounced.
        level.announce(.all(reason: "test: tracking lost"))
        try await level.store.removeValue(forKey: "k")
        if outage == .serveLocalCopies {
            level.announce(.tracking)
            #expect(await waitUntil { cache.isCoherent })
        }
        level.store.setFailing(true)
        let got = await Task { try await cache.getOrFetch(forKey: "k") }.result
        #expect((try? got.get()) == nil, "\(outage): served \(got) after the copies were dropped")
    }
}
