import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// A fetched value the serializer refuses, in a fleet that leases fetches: the shared level holds
/// nothing older than it (the lease was taken on a miss), so what it holds then is newer and stays.
@Suite(.timeLimit(.minutes(10)))
struct LeasedSerializerFailureTests {
    init() { TestLog.install() }

    static func instance(
        _ folder: TemporaryDirectory,
        _ container: String,
        _ level: FakeLeasingLevel,
        withRamCost: Bool,
        fetcher: @escaping @Sendable (String) async throws -> String
    ) throws -> Cache<String> {
        let builder = CacheBuilder<String>(serializer: PoisonSerializer()).containerName(container)
            .directory(folder.url).sharedLevel(level)
            .fleetSingleFetch(leaseDuration: .seconds(3_600), waitLimit: .seconds(3_600))
            .fetcher(fetcher)
        return try (withRamCost ? builder.maxRamCost(1 << 20) : builder).build()
    }

    /// A fetched value refused under a lease that another instance's save ended leaves that save's value.
    ///
    /// The fetch of one instance takes the lease; another instance saves the key meanwhile (which
    /// ends the lease); the fetched value is refused by the serializer. The other instance's value
    /// must stay on the shared level: it is newer than the fetch.
    @Test(arguments: [false, true])
    func aRefusedFetchKeepsAnotherInstancesNewerSharedValue(_ withRamCost: Bool) async throws {
        let folder = TemporaryDirectory()
        let level = FakeLeasingLevel()
        let started = Gate()
        let finish = Gate()
        let fetching = try Self.instance(folder, "a", level, withRamCost: withRamCost) { _ in
            started.open()
            try await finish.wait()
            return "poison"
        }
        let writing = try Self.instance(folder, "b", level, withRamCost: withRamCost) { _ in "fetched by b" }
        let fetch = Task { try? await fetching.getOrFetch(forKey: "k") }
        try await started.wait()
        #expect(level.lease(forKey: "k") != nil)
        try await writing.save("new", forKey: "k")
        #expect(level.lease(forKey: "k") == nil)
        let newer = try await level.get("k")
        finish.open()
        _ = await fetch.value
        await fetching.flush()
        await writing.flush()
        let stored = try? await level.get("k")
        #expect(stored == newer)
        withExtendedLifetime(folder) {}
    }
}
