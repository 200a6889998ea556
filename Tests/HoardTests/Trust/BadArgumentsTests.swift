import Foundation
import Hoard
import HoardRedis
import Testing

/// Arguments out of range follow one rule (README, "Bad arguments").
///
/// A call that can throw throws `invalidConfiguration`; one that cannot stops the program with a
/// precondition. None changes the value silently.
@Suite struct BadArgumentsTests {
    @Test func aNegativeCostLimitStopsTheProgram() async {
        await #expect(processExitsWith: .failure) {
            _ = MemoryCacheLevel<String, String>(capacity: 10, costLimit: -1, cost: { _ in 1 })
        }
    }

    @Test func aNegativeDiskByteLimitStopsTheProgram() async {
        await #expect(processExitsWith: .failure) {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("Hoard-\(UUID().uuidString)")
            _ = DiskCacheLevel<String, String>(
                directory: folder,
                capacity: 10,
                byteLimit: -1,
                serializer: StringSerializer()
            )
        }
    }

    @Test func aNegativeRetryCountSetOnACacheStopsTheProgram() async {
        await #expect(processExitsWith: .failure) {
            let cache = try? CacheBuilder<String>(serializer: StringSerializer()).maxDiskCount(0).build()
            cache?.maxRetryCount = -2
        }
    }

    @Test func anEventBufferOfNoEventsStopsTheProgram() async {
        await #expect(processExitsWith: .failure) {
            let cache = try? CacheBuilder<String>(serializer: StringSerializer()).maxDiskCount(0).build()
            _ = cache?.events(bufferingNewest: 0)
        }
    }

    @Test func aShrinkingOrNegativeBackoffStopsTheProgram() async {
        await #expect(processExitsWith: .failure) {
            _ = RetryBackoff.exponential(initial: .seconds(1), multiplier: 0.5, maximum: .seconds(10))
        }
        await #expect(processExitsWith: .failure) {
            _ = RetryBackoff.exponential(initial: .seconds(1), multiplier: .nan, maximum: .seconds(10))
        }
        await #expect(processExitsWith: .failure) {
            _ = RetryBackoff.constant(.seconds(-1))
        }
    }

    @Test func valuesAtTheEdgeOfTheRangeAreKeptAsGiven() throws {
        let cache = try CacheBuilder<String>(serializer: StringSerializer()).maxDiskCount(0).build()
        cache.maxRetryCount = 0
        #expect(cache.maxRetryCount == 0)
        cache.maxRetryCount = 7
        #expect(cache.maxRetryCount == 7)
        #expect(MemoryCacheLevel<String, String>(capacity: 1, costLimit: 0, cost: { _ in 1 }).costLimit == 0)
        #expect(
            RetryBackoff.exponential(initial: .seconds(1), multiplier: 1, maximum: .seconds(5))
                .delay(beforeRetry: 3) == .seconds(1)
        )
    }

    @Test func aRedisTimeToLiveThatIsNotPositiveThrows() async throws {
        // No server is needed: the argument is refused before any command is sent.
        let level = try RedisCacheLevel(url: "redis://127.0.0.1:1/0", namespace: "bad-arguments")
        for timeToLive in [Duration.zero, .seconds(-1)] {
            let error = await #expect(throws: CacheError.invalidConfiguration) {
                try await level.set(Data("v".utf8), forKey: "k", timeToLive: timeToLive)
            }
            #expect(error?.message.contains("time to live") == true, "\(String(describing: error))")
        }
    }
}
