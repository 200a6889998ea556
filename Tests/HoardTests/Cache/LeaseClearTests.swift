import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// A fetch under a fleet lease that answers after `removeAll()` began.
///
/// Its local store is refused, and its value is still sent to the shared level under its lease
/// (`shareUnderLease`); the clear ended that lease, so the value must not outlive the clear there,
/// nor be served by any cache that heard of the clear.
@Suite(.timeLimit(.minutes(10)), .validatesCacheInvariants)
struct LeaseClearTests {
    /// When the fetch answers: after the whole clear (its shared part made), or in its middle.
    enum Moment: Sendable, CustomStringConvertible {
        case afterTheClear
        case during(ClearTestHooks.Event)

        var description: String {
            switch self {
            case .afterTheClear: "after the clear"
            case .during(let event): "during the clear (\(event))"
            }
        }
    }

    static let before = "fetched before the clear"
    static let after = "fetched after the clear"

    /// An instance of the fleet on `level`, in the container "test" of `folder`.
    static func instance(
        _ folder: TemporaryDirectory,
        _ level: FakeLeasingLevel,
        ramCount: Int = 100,
        fetcher: @escaping @Sendable (String) async throws -> String
    ) throws -> Cache<String> {
        try folder.stringBuilder().maxRamCount(ramCount).sharedLevel(level)
            .fleetSingleFetch(leaseDuration: .seconds(3_600), waitLimit: .seconds(3_600))
            .fetcher(fetcher)
            .build()
    }

    /// An instance whose fetch waits for `gate`, then returns ``before``, with the fetches started.
    static func holder(
        _ folder: TemporaryDirectory,
        _ level: FakeLeasingLevel,
        ramCount: Int = 100
    ) throws -> (Cache<String>, gate: Gate, started: Counter) {
        let gate = Gate()
        let started = Counter()
        let cache = try instance(folder, level, ramCount: ramCount) { _ in
            started.increment()
            try await gate.wait()
            return before
        }
        return (cache, gate, started)
    }

    /// The shared level's bytes for `key`, if any.
    static func shared(_ level: FakeLeasingLevel, _ key: String) async -> Data? {
        try? await level.get(key)
    }

    @Test(
        arguments: [0, 100],
        [Moment.afterTheClear, .during(.clearedDisk), .during(.clearedShared)]
    )
    func aLeasedFetchAnsweringAfterItsCachesClearBeganIsNotShared(_ ramCount: Int, _ moment: Moment) async throws {
        let folder = TemporaryDirectory()
        let level = FakeLeasingLevel()
        let (cache, gate, started) = try Self.holder(folder, level, ramCount: ramCount)
        let caller = Task { try await cache.getOrFetch(forKey: "k") }
        #expect(await waitUntil { started.value == 1 })
        #expect(level.lease(forKey: "k") != nil, "the fetch holds the key's lease")
        switch moment {
        case .afterTheClear:
            cache.removeAll()
            await cache.flush()
            #expect(level.lease(forKey: "k") == nil, "the clear ended the lease")
            gate.open()
            #expect(try await caller.value == Self.before)
        case .during(let event):
            let landed = await removeAll(cache, at: event) {
                gate.open()
                return caller
            }
            #expect(try landed?.get() == Self.before)
        }
        await cache.flush()
        let context = "maxRamCount(\(ramCount)), answered \(moment)"
        #expect(await Self.shared(level, "k") == nil, "\(context): the value fetched before the clear is shared")
        #expect(cache["k"] == nil, "\(context): it is kept")
        #expect(folder.entryFiles().isEmpty, "\(context): it is on disk")
        let other = try Self.instance(TemporaryDirectory(), level) { _ in Self.after }
        #expect(try await other.getOrFetch(forKey: "k") == Self.after, "\(context): another instance got it")
    }

    /// Another instance of the fleet clears the shared level while the holder fetches: in another
    /// container (another process, or machine), or in the holder's own container.
    @Test(arguments: [false, true])
    func aLeasedFetchAnsweringAfterAnotherInstancesClearIsNotShared(_ sameContainer: Bool) async throws {
        let folder = TemporaryDirectory()
        let level = FakeLeasingLevel()
        let (holder, gate, started) = try Self.holder(folder, level)
        let peerFolder = sameContainer ? folder : TemporaryDirectory()
        let peer = try Self.instance(peerFolder, level) { _ in Self.after }
        let caller = Task { try await holder.getOrFetch(forKey: "k") }
        #expect(await waitUntil { started.value == 1 })
        #expect(level.lease(forKey: "k") != nil, "the fetch holds the key's lease")
        peer.removeAll()
        await peer.flush()
        #expect(level.lease(forKey: "k") == nil, "the clear ended the lease")
        gate.open()
        #expect(try await caller.value == Self.before)
        await holder.flush()
        let context = sameContainer ? "a clear in the holder's container" : "a clear by another container"
        #expect(await Self.shared(level, "k") == nil, "\(context): the value fetched before the clear is shared")
        if sameContainer {
            // The holder heard of the clear (its bracket): nothing of its fetch is kept. In another
            // container, without coherence, it keeps what it fetched, as every local copy it had.
            #expect(holder["k"] == nil, "\(context): the holder kept its fetch")
        }
        #expect(try await peer.getOrFetch(forKey: "k") == Self.after, "\(context): the clearing instance got it")
    }
}
