import Dispatch
import Foundation

/// Reads the kernel's memory pressure at intervals and reports when it rises above a threshold: how
/// ``CacheLevel/listenToMemoryWarnings()`` hears memory warnings on Linux.
///
/// The reading is the text of `/proc/pressure/memory`, such as
/// ```
/// some avg10=12.50 avg60=3.10 avg300=0.80 total=123456
/// full avg10=4.00 avg60=1.00 avg300=0.20 total=45678
/// ```
/// ``tick()`` warns when `some avg10` rises above ``threshold``, and again only after it has fallen
/// back to the threshold or below, so that sustained pressure does not empty the caches every few
/// seconds. Reading and ticking are separate from the timer so that tests can drive them.
final class MemoryPressurePoller: Sendable {
    /// The default threshold: 10 % of the last 10 seconds spent with some task stalled on memory.
    static let defaultThreshold = 10.0

    /// The file the kernel publishes memory pressure in.
    static let kernelPressurePath = "/proc/pressure/memory"

    /// The share of time, in percent, above which ``tick()`` warns.
    let threshold: Double
    private let read: @Sendable () -> String?
    private let onWarning: @Sendable () -> Void
    private let isAboveThreshold = Locked(false)

    /// Creates a poller.
    ///
    /// - Parameters:
    ///   - threshold: The `some avg10` value, in percent, above which the poller warns.
    ///   - read: Returns the text of the pressure file, or `nil` when there is none.
    ///   - onWarning: Called when the pressure rises above the threshold, on the thread of ``tick()``.
    init(
        threshold: Double = defaultThreshold,
        read: @escaping @Sendable () -> String?,
        onWarning: @escaping @Sendable () -> Void
    ) {
        self.threshold = threshold
        self.read = read
        self.onWarning = onWarning
    }

    /// Returns the text of `/proc/pressure/memory`, or `nil` where it does not exist or cannot be read.
    @Sendable
    static func readKernelPressure() -> String? {
        try? String(contentsOfFile: kernelPressurePath, encoding: .utf8)
    }

    /// Returns the `avg10` value of the `some` line of a pressure reading, in percent.
    ///
    /// - Parameter reading: The text of a pressure file.
    /// - Returns: The value, or `nil` when the text has no `some` line with an `avg10` number.
    static func someAverage10(in reading: String) -> Double? {
        for line in reading.split(whereSeparator: \.isNewline) {
            let fields = line.split(separator: " ")
            guard fields.first == "some" else { continue }
            for field in fields.dropFirst() where field.hasPrefix("avg10=") {
                return Double(field.dropFirst("avg10=".count))
            }
        }
        return nil
    }

    /// Reads the pressure once and warns when it has just risen above the threshold.
    ///
    /// A missing or unreadable reading changes nothing.
    func tick() {
        guard let reading = read(), let average = Self.someAverage10(in: reading) else { return }
        let isAbove = average > threshold
        let wasAbove = isAboveThreshold.withLock { state in
            defer { state = isAbove }
            return state
        }
        if isAbove && !wasAbove {
            HoardLogger.log(.info, "Memory pressure is \(average) % (some avg10); sending a memory warning.")
            onWarning()
        }
    }

    /// Starts ticking every `interval` on a system queue, when a first reading succeeds.
    ///
    /// - Parameter interval: The time between two readings.
    /// - Returns: A subscription that stops the timer; an inactive one when there is nothing to read.
    func start(interval: DispatchTimeInterval = .seconds(5)) -> MemoryWarningSubscription {
        guard let reading = read(), Self.someAverage10(in: reading) != nil else {
            HoardLogger.log(
                .info,
                "\(Self.kernelPressurePath) is missing or unreadable, so memory warnings will not be delivered."
            )
            return MemoryWarningSubscription(source: nil)
        }
        let timer = DispatchSource.makeTimerSource(queue: .global(qos: .utility))
        timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .seconds(1))
        timer.setEventHandler { [self] in tick() }
        timer.resume()
        return MemoryWarningSubscription(source: timer)
    }
}
