import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// A value's expiry on every path it takes between instances: never extended.
struct ExpiryPathTests {
    @Test func aKeyedSaveKeepsItsDeadlineThroughTheSharedLevelIntoAnotherInstancesLevels() async throws {
        let folder = TemporaryDirectory()
        let clock = ManualClock()
        let shared = FakeSharedLevel()
        let writer = try folder.stringBuilder("a").sharedLevel(shared).clock(clock.read).build()
        let keyed = writer.keyed { (id: Int) in "user-\(id)" }
        try await keyed.save("v", forKey: 7, expiry: .seconds(30))
        let deadline = clock.now.addingTimeInterval(30)
        #expect(writer.entry(forKey: "user-7")?.expiresAt == deadline)
        // A second instance, one that caps local copies at a minute and one at ten seconds.
        for (name, maxAge) in [("b", 60.0), ("c", 10.0)] {
            let reader = try folder.stringBuilder(name).sharedLevel(shared).clock(clock.read)
                .coherence(.ttlOnly(maxAge: .seconds(maxAge))).build()
            #expect(try await reader.getOrFetch(forKey: "user-7") == "v")
            let local = min(deadline, clock.now.addingTimeInterval(maxAge))
            #expect(reader.entry(forKey: "user-7")?.expiresAt == local)
            await reader.flush()
            reader.clearMemory()
            #expect(reader.entry(forKey: "user-7")?.expiresAt == local)
            #expect(reader["user-7"] == "v")
            #expect(reader.entry(forKey: "user-7")?.level == .memory)
            #expect(reader.entry(forKey: "user-7")?.expiresAt == local)
        }
        clock.advance(by: 30)
        let late = try folder.stringBuilder("d").sharedLevel(shared).clock(clock.read).fetcher { _ in "fetched" }
            .build()
        #expect(try await late.getOrFetch(forKey: "user-7") == "fetched")
    }
}
