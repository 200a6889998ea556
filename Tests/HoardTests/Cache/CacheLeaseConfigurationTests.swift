import Foundation
import HoardRedis
import Testing

@testable import Hoard

/// `fleetSingleFetch` checked by `build()`: it needs a shared level that can lease, and durations
/// above zero.
@Suite struct CacheLeaseConfigurationTests {
    @Test func aSharedLevelThatCannotLeaseMakesBuildThrowAndSaysWhy() throws {
        let folder = TemporaryDirectory()
        let plain = folder.stringBuilder().sharedLevel(FakeSharedLevel()).fleetSingleFetch()
        let cannotLease = #expect(throws: CacheError.self) { try plain.build() }
        #expect(cannotLease?.code == .invalidConfiguration)
        #expect(cannotLease?.message.contains("LeasingCacheLevel") == true)
        #expect(cannotLease?.message.contains("FakeSharedLevel") == true)
        let noShared = #expect(throws: CacheError.self) { try folder.stringBuilder("b").fleetSingleFetch().build() }
        #expect(noShared?.code == .invalidConfiguration)
        #expect(noShared?.message.contains("sharedLevel") == true)
    }

    @Test(arguments: [(Duration.zero, Duration.seconds(1)), (.seconds(1), .zero), (.seconds(-1), .seconds(1))])
    func durationsMustBeAboveZero(leaseDuration: Duration, waitLimit: Duration) throws {
        let folder = TemporaryDirectory()
        // Checked before the level is asked anything: no server is needed.
        let level = try RedisCacheLevel(url: "redis://127.0.0.1:1", namespace: "n")
        let builder = folder.stringBuilder().sharedLevel(level)
            .fleetSingleFetch(leaseDuration: leaseDuration, waitLimit: waitLimit)
        let error = #expect(throws: CacheError.self) { try builder.build() }
        #expect(error?.code == .invalidConfiguration)
        #expect(error?.message.contains("fleetSingleFetch") == true)
    }
}
