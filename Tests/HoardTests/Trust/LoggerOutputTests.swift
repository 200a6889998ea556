import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Found by the stress tests: every read of `HoardLogger.output` (each log call makes one) wrapped
/// the stored closure in two more reabstraction thunks, so each call got slower and deeper than the
/// last (quadratic time; 16 000 log calls took 4 s in a release build, and the stack grows without
/// bound).
@Suite struct LoggerOutputTests {
    init() { TestLog.install() }

    @Test func readingTheOutputDoesNotDeepenTheCallChain() {
        let probe = "depth probe \(UUID().uuidString)"
        let depths = Protected<[Int]>([])
        let previous = HoardLogger.output
        // Forwards to the test log, so that tests running meanwhile still see their messages.
        HoardLogger.output = { message, level in
            if message == probe { depths.withLock { $0.append(Thread.callStackReturnAddresses.count) } }
            previous?(message, level)
        }
        defer { HoardLogger.output = previous }
        HoardLogger.log(.debug, probe)
        // Few reads: the recorded stack is capped at about 128 frames.
        for _ in 0..<20 { _ = HoardLogger.output }
        HoardLogger.log(.debug, probe)
        let recorded = depths.withLock { $0 }
        #expect(recorded.count == 2)
        if let first = recorded.first, let last = recorded.last {
            #expect(last - first < 10, "the call went from \(first) to \(last) frames deep")
        }
    }
}
