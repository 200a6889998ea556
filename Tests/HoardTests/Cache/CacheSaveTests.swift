import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Durable saves: `save` returns once the value is in its file, or throws.
@Suite(.validatesCacheInvariants) struct CacheSaveTests {
    @Test func aSaveReturnsWithItsValueInItsFile() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().build()
        try await cache.save("v", forKey: "k")
        #expect(folder.entryFiles() == [DiskKey("k").fileName])
        #expect(cache["k"] == "v")
        // Another store on the folder, as another process would open it, reads it without a flush.
        let other = try folder.stringBuilder().maxRamCount(0).build(sharingStore: false)
        #expect(other["k"] == "v")
        withExtendedLifetime((cache, other, folder)) {}
    }

    @Test func everyFormSavesWithAnExpiry() async throws {
        let folder = TemporaryDirectory()
        let clock = ManualClock()
        let cache = try folder.stringBuilder().clock(clock.read).build()
        try await cache.save("async", forKey: "a", expiry: .seconds(60))
        let blocking = await onPlainThread { Result { try cache.saveAndWait("blocking", forKey: "b") } }
        #expect((try? blocking.get()) != nil)
        let viaCallback = await withCheckedContinuation { continuation in
            cache.save("callback", forKey: "c") { continuation.resume(returning: $0) }
        }
        #expect((try? viaCallback.get()) != nil)
        let expiringViaCallback = await withCheckedContinuation { continuation in
            cache.save("callback", forKey: "d", expiry: .seconds(90)) { continuation.resume(returning: $0) }
        }
        #expect((try? expiringViaCallback.get()) != nil)
        #expect(Set(folder.entryFiles()) == Set(["a", "b", "c", "d"].map { DiskKey($0).fileName }))
        #expect(cache.entry(forKey: "a")?.expiresAt == clock.now.addingTimeInterval(60))
        #expect(cache.entry(forKey: "c")?.expiresAt == nil)
        #expect(cache.entry(forKey: "d")?.expiresAt == clock.now.addingTimeInterval(90))
        withExtendedLifetime(folder) {}
    }

    @Test func aSerializerFailureThrowsAndKeepsNoValue() async throws {
        let folder = TemporaryDirectory()
        let delegate = RecordingDelegate<String>()
        let cache = try CacheBuilder<String>(serializer: PoisonSerializer()).containerName("p").directory(folder.url)
            .delegate(delegate).build()
        cache["poison"] = "old"
        await #expect(throws: CacheError.serializationFailed) { try await cache.save("poison", forKey: "poison") }
        #expect(folder.entryFiles(in: "p").isEmpty)  // the older value must not be served either
        #expect(delegate.lastStoreError != nil)
    }

    @Test func aSerializerFailureWithAMemoryBudgetThrowsToo() async throws {
        let folder = TemporaryDirectory()
        let cache = try CacheBuilder<String>(serializer: PoisonSerializer()).containerName("p").directory(folder.url)
            .maxRamCost(1 << 20).build()
        await #expect(throws: CacheError.serializationFailed) { try await cache.save("poison", forKey: "k") }
        #expect(cache["k"] == nil)
    }

    @Test func aValueLargerThanTheByteLimitThrowsAndStaysInMemory() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().maxDiskBytes(100).build()
        let error = await #expect(throws: CacheError.valueTooLarge) {
            try await cache.save(String(repeating: "x", count: 1_000), forKey: "big")
        }
        #expect(error?.message.contains("maxDiskBytes") == true)
        #expect(cache["big"]?.count == 1_000)
        #expect(folder.entryFiles().isEmpty)
    }

    @Test func aMemoryOnlyCacheRefusesToSave() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().maxDiskCount(0).build()
        let error = await #expect(throws: CacheError.invalidConfiguration) { try await cache.save("v", forKey: "k") }
        #expect(error?.message.contains("maxDiskCount") == true)
        #expect(cache["k"] == nil)
    }

    @Test func aSaveOvertakenByALaterChangeReturnsWithTheLatestStateOnDisk() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().build()
        for round in 0..<50 {
            async let saved: Void = cache.save("saved \(round)", forKey: "k")
            cache["k"] = "set \(round)"
            try await saved
            await cache.flush()
            let path = folder.container().appendingPathComponent(DiskKey("k").fileName).path
            let entry = try EntryFormat.decode(RawFiles.read(path))
            // Whichever ran last (the save's task or the set) is what memory and disk both hold.
            #expect(String(decoding: entry.payload, as: UTF8.self) == cache["k"])
            cache.removeAll()
        }
        // A save that a clear overtakes returns too.
        async let saved: Void = cache.save("saved", forKey: "x")
        cache.removeAll()
        try await saved
        withExtendedLifetime(folder) {}
    }

    @Test func manyConcurrentSavesEachReturnWithTheirValueOnDisk() async throws {
        let folder = TemporaryDirectory()
        let cache = try folder.stringBuilder().maxRamCount(10).build()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<200 { group.addTask { try await cache.save("v\(index)", forKey: "k\(index)") } }
            try await group.waitForAll()
        }
        #expect(folder.entryFiles().count == 200)
        withExtendedLifetime(folder) {}
    }
}
