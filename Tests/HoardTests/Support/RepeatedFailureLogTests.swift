import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// A failure repeated thousands of times is logged as an outage: its start, a count now and then,
/// its end.
struct RepeatedFailureLogTests {
    init() { TestLog.install() }

    @Test func anOutageIsItsFirstFailureACountEveryIntervalAndOneLineWhenItEnds() {
        let subject = "Subject \(UUID().uuidString)"
        let start = ContinuousClock.now
        let offset = Protected(Duration.zero)
        let log = RepeatedFailureLog(subject, interval: .seconds(10)) { start + offset.withLock { $0 } }
        for index in 0..<1_000 {
            offset.withLock { $0 = .milliseconds(index) }
            log.failed("attempt \(index)")
        }
        #expect(TestLog.messages(containing: subject).map(\.message) == ["\(subject) failed: attempt 0"])
        // Ten seconds after the first line, the next failure logs the count since.
        offset.withLock { $0 = .seconds(10) }
        log.failed("attempt 1000")
        let lines = TestLog.messages(containing: subject).map(\.message)
        #expect(lines.count == 2)
        #expect(lines.last?.contains("failed 1000 more time(s) in the last 10.0 s; the latest: attempt 1000") == true)
        #expect(log.isFailing)
        log.succeeded()
        log.succeeded()
        #expect(TestLog.messages(containing: subject).last?.message == "\(subject) works again, after 1001 failure(s).")
        #expect(TestLog.messages(containing: subject).count == 3)
        #expect(!log.isFailing)
        // The next outage starts over.
        log.failed("again")
        #expect(TestLog.messages(containing: subject).last?.message == "\(subject) failed: again")
    }

    @Test func aReportToldLateAboutAnAttemptThatBeganBeforeTheLastChangeChangesNothing() {
        let subject = "Subject \(UUID().uuidString)"
        let start = ContinuousClock.now
        let offset = Protected(Duration.zero)
        let log = RepeatedFailureLog(subject, interval: .seconds(10)) { start + offset.withLock { $0 } }
        func lines() -> [String] { TestLog.messages(containing: subject).map(\.message) }
        // A connection found the server gone at 2 s; another one's handshake, begun at 1 s and
        // answered before the server died, is told at 3 s.
        offset.withLock { $0 = .seconds(3) }
        log.failed("closed", began: start + .seconds(2))
        log.succeeded(began: start + .seconds(1))
        #expect(lines() == ["\(subject) failed: closed"])
        #expect(log.isFailing)
        // The server is back: an attempt begun after the outage was found ends it.
        offset.withLock { $0 = .seconds(5) }
        log.succeeded(began: start + .seconds(4))
        #expect(lines().last == "\(subject) works again, after 1 failure(s).")
        #expect(!log.isFailing)
        // An attempt begun while the server was still down, told after that success, is old news.
        offset.withLock { $0 = .seconds(6) }
        log.failed("refused", began: start + .seconds(3.5))
        #expect(lines().count == 2)
        #expect(!log.isFailing)
        // A failure of an attempt begun after the success is a new outage.
        log.failed("closed again", began: start + .seconds(5.5))
        #expect(lines().last == "\(subject) failed: closed again")
        #expect(log.isFailing)
    }

    /// A success that began before the outage was found, told late, changes nothing, even when the
    /// failed attempt that found the outage began before it (a pool's connections reconnecting together).
    @Test func aLateSuccessBegunAfterTheFailedAttemptBeganButBeforeItFailedChangesNothing() {
        let subject = "Subject \(UUID().uuidString)"
        let start = ContinuousClock.now
        let offset = Protected(Duration.zero)
        let log = RepeatedFailureLog(subject, interval: .seconds(10)) { start + offset.withLock { $0 } }
        func lines() -> [String] { TestLog.messages(containing: subject).map(\.message) }
        // One connection's handshake begins at 0 s, another's at 1 s; the second is answered at 2 s;
        // the server dies at 3 s, and the first handshake fails then.
        offset.withLock { $0 = .seconds(3) }
        log.failed("closed", began: start)
        // The second connection's success is told at 4 s, after the outage was found.
        offset.withLock { $0 = .seconds(4) }
        log.succeeded(began: start + .seconds(1))
        #expect(lines() == ["\(subject) failed: closed"])
        #expect(log.isFailing)
        // An attempt begun after the outage was found ends it.
        offset.withLock { $0 = .seconds(6) }
        log.succeeded(began: start + .seconds(5))
        #expect(lines().last == "\(subject) works again, after 1 failure(s).")
        #expect(!log.isFailing)
    }

    @Test func aCacheWhoseSharedLevelIsDownLogsAFewLinesNotOneARead() async throws {
        let folder = TemporaryDirectory()
        let level = FakeSharedLevel()
        level.setFailing(true)
        let cache = try folder.stringBuilder().sharedLevel(level).fetcher { "fetched \($0)" }.build()
        let marker = "outage-\(UUID().uuidString)"
        for index in 0..<500 { _ = try await cache.getOrFetch(forKey: "\(marker)-\(index)") }
        await cache.flush()
        // Each read, and each write of the fetched value back.
        #expect(cache.statistics.sharedErrors == 1_000)
        // The first failure, and a count every 10 s at most: however slow the run, far fewer than 1000.
        let lines = TestLog.messages(containing: marker)
        #expect(lines.count >= 1 && lines.count < 50, "\(lines.count) lines")
        #expect(cache.reporter.sharedReadFailures.isFailing)
        level.setFailing(false)
        #expect(cache.reporter.sharedWriteFailures.isFailing)
        _ = try await cache.getOrFetch(forKey: "after-\(marker)")
        #expect(!cache.reporter.sharedReadFailures.isFailing)
        // The write of the fetched value back ends the writes' outage.
        await cache.flush()
        #expect(!cache.reporter.sharedWriteFailures.isFailing)
    }
}
