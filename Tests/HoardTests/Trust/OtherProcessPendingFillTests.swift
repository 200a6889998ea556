import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// An outdated fill waiting on this process's writer is not served.
///
/// A fill (a fetched value) of this process that another process's clear or save overtook waits on
/// this process's writer after the catch-up that made it outdated: the news of that change reached
/// the caches (their memory copy went), and the writer will not land the fill. Until it drops it,
/// the fill must not be served either, nor copied back into memory, where it would outlive the drop.
///
/// The other process is a second store on the container (`sharingStore: false`). This process's
/// writer is held first in the serializer of an earlier write (so that the fill is queued behind
/// it, and the section that lands that write catches up with the other store's change), then in
/// the fill's own serializer (so that the fill is still pending once the news was told).
@Suite(.timeLimit(.minutes(10)))
struct OtherProcessPendingFillTests {
    /// Serializes strings; the values in `held` wait for their gate, each the first time only.
    final class HoldingSerializer: CacheSerializer, Sendable {
        let gates: [String: ThreadGate]
        let started: [String: Counter]

        init(holding held: [String]) {
            gates = Dictionary(uniqueKeysWithValues: held.map { ($0, ThreadGate()) })
            started = Dictionary(uniqueKeysWithValues: held.map { ($0, Counter()) })
        }

        func serialize(_ value: String) throws -> Data {
            if let gate = gates[value], started[value]?.increment() == 1 { gate.wait() }
            return Data(value.utf8)
        }

        func deserialize(_ data: Data) throws -> String { String(decoding: data, as: UTF8.self) }
    }

    /// A builder on the container with the serializer type its first cache uses, holding nothing.
    func builder(_ folder: TemporaryDirectory) -> CacheBuilder<String> {
        CacheBuilder<String>(serializer: HoldingSerializer(holding: [])).containerName("test").directory(folder.url)
    }

    /// Makes the fill of `k` wait on this process's writer, runs `change` (another store's), lets the
    /// writer catch up with it, and reads `k` while the fill, outdated, still waits.
    ///
    /// - Returns: What the read found then (and whether `allKeys` listed `k` just before), and once
    ///   the writer is done.
    func readWhileAnOutdatedFillWaits(
        ramCount: Int,
        _ change: @escaping @Sendable (TemporaryDirectory) async throws -> AnyObject
    ) async throws -> (during: String?, listed: Bool, after: String?) {
        let folder = TemporaryDirectory()
        let serializer = HoldingSerializer(holding: ["holds the writer", "fetched"])
        let cache = try CacheBuilder<String>(serializer: serializer).containerName("test").directory(folder.url)
            .maxRamCount(ramCount)
            .fetcher { _ in "fetched" }
            .build()
        cache["held"] = "holds the writer"
        #expect(await waitUntil { serializer.started["holds the writer"]?.value == 1 })
        #expect(try await cache.getOrFetch(forKey: "k") == "fetched")
        // The other store stays open until the end: closing, it could replace its journal.
        let other = try await change(folder)
        defer { withExtendedLifetime(other) {} }
        // The writer lands the earlier write, catching up with the change and telling the caches,
        // then takes the fill and waits in its serializer.
        serializer.gates["holds the writer"]?.open()
        #expect(await waitUntil { serializer.started["fetched"]?.value == 1 })
        let listed = cache.allKeys.contains("k")
        let during = cache["k"]
        serializer.gates["fetched"]?.open()
        await cache.flush()
        return (during, listed, cache["k"])
    }

    @Test(arguments: [0, 100])
    func aPendingFillOutdatedByAnotherStoresClearIsNotServed(_ ramCount: Int) async throws {
        let (during, listed, after) = try await readWhileAnOutdatedFillWaits(ramCount: ramCount) { folder in
            let other = try builder(folder).build(sharingStore: false)
            other.removeAll()
            await other.flush()
            return other
        }
        #expect(!listed, "maxRamCount(\(ramCount)): a fill the other store's clear removed was listed")
        #expect(during == nil, "maxRamCount(\(ramCount)): a fill the other store's clear removed was served")
        #expect(after == nil, "maxRamCount(\(ramCount)): a fill the other store's clear removed was kept")
    }

    @Test(arguments: [0, 100])
    func aPendingFillOutdatedByAnotherStoresSaveIsNotServed(_ ramCount: Int) async throws {
        let (during, listed, after) = try await readWhileAnOutdatedFillWaits(ramCount: ramCount) { folder in
            let other = try builder(folder).build(sharingStore: false)
            try await other.save("saved", forKey: "k")
            return other
        }
        #expect(listed)
        #expect(during == "saved", "maxRamCount(\(ramCount)): an older fill was served over the other store's save")
        #expect(after == "saved", "maxRamCount(\(ramCount)): an older fill was kept over the other store's save")
    }
}
