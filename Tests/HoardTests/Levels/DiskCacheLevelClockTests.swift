import Dispatch
import Foundation
import Testing

@testable import Hoard

/// A disk level tells expired entries by the clock it is given, not the system's.
@Suite struct DiskCacheLevelClockTests {
    /// A disk level on the test container of `folder`, on `clock`.
    private static func level(_ folder: TemporaryDirectory, _ clock: ManualClock) -> DiskCacheLevel<String, String> {
        DiskCacheLevel(
            directory: folder.container(),
            capacity: 1_000,
            serializer: StringSerializer(),
            clock: clock.read
        )
    }

    @Test func anEntryIsLiveBeforeItsExpiryAndAMissFromItOnTheLevelsClock() async throws {
        let folder = TemporaryDirectory()
        let clock = ManualClock()
        let cache = try folder.stringBuilder().clock(clock.read).build()
        cache.set("v", forKey: "k", expiry: .seconds(10))
        await cache.flush()
        let level = Self.level(folder, clock)
        clock.advance(by: 9)
        #expect(try await level.get("k") == "v")
        clock.advance(by: 1)
        await #expect(throws: CacheError.notFound) { try await level.get("k") }
    }

    @Test func aPendingWriteIsJudgedByTheSameClock() async throws {
        let folder = TemporaryDirectory()
        let clock = ManualClock()
        let cache = try folder.stringBuilder().clock(clock.read).build()
        let level = Self.level(folder, clock)
        cache.set("v", forKey: "k", expiry: .seconds(10))
        #expect(try await level.get("k") == "v")
        clock.advance(by: 10)
        await #expect(throws: CacheError.notFound) { try await level.get("k") }
    }

    /// A disk hit asks the clock only for a value that can expire: one that never does costs no
    /// clock read, through a cache or a disk level.
    @Test func aDiskHitReadsTheClockOnlyForAValueThatCanExpire() async throws {
        let folder = TemporaryDirectory()
        let clock = ManualClock()
        let cache = try folder.stringBuilder().maxRamCount(0).clock(clock.read).build()
        cache["forever"] = "v"
        cache.set("soon", forKey: "brief", expiry: .seconds(10))
        await cache.flush()
        let level = Self.level(folder, clock)
        var before = clock.readCount
        #expect(cache["forever"] == "v")
        #expect(clock.readCount == before, "the cache read the clock")
        #expect(try await level.get("forever") == "v")
        #expect(clock.readCount == before, "the disk level read the clock")
        #expect(cache["brief"] == "soon")
        #expect(clock.readCount > before)
        before = clock.readCount
        #expect(try await level.get("brief") == "soon")
        #expect(clock.readCount > before)
        clock.advance(by: 10)
        #expect(cache["brief"] == nil)
    }
}

/// A disk level's count is what a user expects: values set, landed or not.
@Suite struct DiskCacheLevelCountTests {
    @Test func theCountIncludesWritesNotLandedYetAndExcludesPendingRemovals() async throws {
        let folder = TemporaryDirectory()
        let gate = DispatchSemaphore(value: 0)
        let serializer = GateSerializer(gate: gate)
        let level = DiskCacheLevel<String, String>(directory: folder.container(), capacity: 100, serializer: serializer)
        // A cache on the same container holds the writer: it serializes "block" on the writer.
        let cache = try folder.stringBuilder().serializer(serializer).maxDiskCount(100).build()
        cache["blocker"] = "block"
        for index in 0..<5 { try await level.set("v", forKey: "k\(index)") }
        #expect(level.count == 6)  // nothing has landed: "blocker" and the five
        try await level.removeValue(forKey: "k0")
        try await level.set("again", forKey: "k1")  // a replacement: still one value
        #expect(level.count == 5)
        gate.signal()
        await level.flush()
        #expect(level.count == 5)  // the four, and "blocker"
        withExtendedLifetime(cache) {}
    }
}

/// A string serializer that waits for a gate before encoding "block": holds the writer.
private struct GateSerializer: CacheSerializer {
    let gate: DispatchSemaphore

    func serialize(_ value: String) throws -> Data {
        if value == "block" { gate.wait() }
        return Data(value.utf8)
    }

    func deserialize(_ data: Data) throws -> String { String(decoding: data, as: UTF8.self) }
}
