import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// A value the serializer refuses, in a cache with a shared level: the set fails, and the older value
/// must not be served afterwards from any level, the shared one included.
@Suite(.timeLimit(.minutes(10)))
struct SharedSerializerFailureTests {
    init() { TestLog.install() }

    /// With or without a memory budget (which serializes at the set rather than in the writers).
    @Test(arguments: [false, true])
    func aRefusedValueLeavesNoOlderValueInTheSharedLevel(_ withRamCost: Bool) async throws {
        let folder = TemporaryDirectory()
        let shared = RecordingLevel<String, Data>()
        let builder = CacheBuilder<String>(serializer: PoisonSerializer()).containerName("p").directory(folder.url)
            .sharedLevel(shared)
        let cache = try (withRamCost ? builder.maxRamCost(1 << 20) : builder).build()
        try await cache.save("old", forKey: "k")
        #expect(shared.values.count == 1)
        await #expect(throws: CacheError.serializationFailed) { try await cache.save("poison", forKey: "k") }
        cache.clearMemory()
        // Not "old": the set of the value that could not be stored came after it. With a memory
        // budget the set fails before its shared write is queued, and the removal of the older value
        // is queued apart: the read waits for it rather than find the older value there.
        #expect((try? await cache.getOrFetch(forKey: "k")) == nil)
        await cache.flush()
        #expect(shared.values.isEmpty)
        withExtendedLifetime(folder) {}
    }
}
