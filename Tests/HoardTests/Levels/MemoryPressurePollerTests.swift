import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Tests for `MemoryPressurePoller` and `MemoryWarningSubscription`: the parser, the threshold and the
/// hook, driven by injected readings and manual ticks.
@Suite struct MemoryPressurePollerTests {
    static func reading(some: String) -> String {
        "some avg10=\(some) avg60=1.00 avg300=0.50 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    }

    @Test func parsesTheSomeAverage10() {
        #expect(MemoryPressurePoller.someAverage10(in: Self.reading(some: "12.50")) == 12.5)
        #expect(MemoryPressurePoller.someAverage10(in: Self.reading(some: "0.00")) == 0)
        let fullFirst = "full avg10=99.00 avg60=0 avg300=0 total=0\nsome avg10=3.25 avg60=0 avg300=0 total=0"
        #expect(MemoryPressurePoller.someAverage10(in: fullFirst) == 3.25)
    }

    @Test(arguments: ["", "garbage", "some avg60=1.00 total=3", "some avg10=abc avg60=0", "full avg10=50.00"])
    func rejectsReadingsWithoutASomeAverage10(reading: String) {
        #expect(MemoryPressurePoller.someAverage10(in: reading) == nil)
    }

    @Test func warnsWhenThePressureRisesAboveTheThreshold() async throws {
        let level = MemoryCacheLevel<String, Int>(capacity: 4)
        try await level.set(1, forKey: "a")
        let reading = Protected(Self.reading(some: "0.00"))
        let warnings = Counter()
        let poller = MemoryPressurePoller(read: { reading.withLock { $0 } }) {
            warnings.increment()
            level.onMemoryWarning()
        }
        poller.tick()
        #expect(warnings.value == 0)
        #expect(level.count == 1)

        reading.withLock { $0 = Self.reading(some: "42.00") }
        poller.tick()
        #expect(warnings.value == 1)
        #expect(level.count == 0)
    }

    @Test func warnsOncePerRiseAboveTheThreshold() {
        let reading = Protected(Self.reading(some: "50.00"))
        let warnings = Counter()
        let poller = MemoryPressurePoller(threshold: 10, read: { reading.withLock { $0 } }) {
            warnings.increment()
        }
        poller.tick()
        poller.tick()
        #expect(warnings.value == 1)
        reading.withLock { $0 = Self.reading(some: "10.00") }
        poller.tick()
        reading.withLock { $0 = Self.reading(some: "10.01") }
        poller.tick()
        #expect(warnings.value == 2)
    }

    @Test func aMissingReadingChangesNothing() {
        let warnings = Counter()
        let poller = MemoryPressurePoller(read: { nil }) { warnings.increment() }
        poller.tick()
        #expect(warnings.value == 0)
        let subscription = poller.start()
        #expect(!subscription.isActive)
    }

    @Test func aReadableFileStartsATimerThatCancelStops() {
        let poller = MemoryPressurePoller(read: { Self.reading(some: "0.00") }) {}
        let subscription = poller.start(interval: .seconds(3600))
        #expect(subscription.isActive)
        subscription.cancel()
        #expect(!subscription.isActive)
        subscription.cancel()
    }

    @Test func listeningOnACompositionReturnsASubscription() {
        let level = MemoryCacheLevel<String, Int>(capacity: 4).compose(MemoryCacheLevel<String, Int>(capacity: 4))
        let subscription = level.listenToMemoryWarnings()
        #if canImport(Darwin)
        #expect(subscription.isActive)
        #else
        #expect(subscription.isActive == (MemoryPressurePoller.readKernelPressure() != nil))
        #endif
        subscription.cancel()
        #expect(!subscription.isActive)
    }
}
