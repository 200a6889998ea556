import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// `SharedLeases.result(of:before:late:)`: how a lease wait stops waiting for a call of the level.
@Suite(.timeLimit(.minutes(10)))
struct LeaseWaitRaceTests {
    @Test func anAnswerBeforeTheDeadlineIsReturned() async {
        let late = Counter()
        let answer = await SharedLeases.result(
            of: { 42 },
            before: ContinuousClock.now + .seconds(3_600),
            late: { _ in late.increment() }
        )
        #expect(answer == 42)
        #expect(late.value == 0)
    }

    @Test func anAnswerAfterTheDeadlineGoesToLate() async {
        let gate = Gate()
        let lateAnswers = Protected([Int]())
        let answer = await SharedLeases.result(
            of: { () async -> Int in
                try? await gate.wait()
                return 7
            },
            before: ContinuousClock.now + .milliseconds(10),
            late: { value in lateAnswers.withLock { $0.append(value) } }
        )
        #expect(answer == nil)
        gate.open()
        #expect(await waitUntil { lateAnswers.withLock { $0 } == [7] })
    }

    @Test func aDeadlinePastAlreadyGivesNilAndTheAnswerGoesToLate() async {
        let gate = Gate()
        let lateAnswers = Protected([Int]())
        let answer = await SharedLeases.result(
            of: { () async -> Int in
                try? await gate.wait()
                return 3
            },
            before: ContinuousClock.now - .seconds(1),
            late: { value in lateAnswers.withLock { $0.append(value) } }
        )
        #expect(answer == nil)
        gate.open()
        #expect(await waitUntil { lateAnswers.withLock { $0 } == [3] })
    }

    @Test func aCallerCancelledAlreadyStartsNothing() async {
        let started = Counter()
        let caller = Task { () async -> Int? in
            while !Task.isCancelled { await Task.yield() }
            return await SharedLeases.result(
                of: { () async -> Int in
                    started.increment()
                    return 1
                },
                before: ContinuousClock.now + .seconds(3_600),
                late: { _ in }
            )
        }
        caller.cancel()
        #expect(await caller.value == nil)
        #expect(started.value == 0)
    }

    @Test func cancellingTheCallerEndsTheWaitAndTheAnswerGoesToLate() async {
        let gate = Gate()
        let started = Counter()
        let lateAnswers = Protected([Int]())
        let finished = Protected<Int??>(nil)
        let caller = Task {
            let answer = await SharedLeases.result(
                of: { () async -> Int in
                    started.increment()
                    try? await gate.wait()
                    return 9
                },
                before: ContinuousClock.now + .seconds(3_600),
                late: { value in lateAnswers.withLock { $0.append(value) } }
            )
            finished.withLock { $0 = .some(answer) }
        }
        #expect(await waitUntil { started.value == 1 })
        caller.cancel()
        #expect(await waitUntil { finished.withLock { $0 } != nil })
        #expect(finished.withLock { $0 } == .some(nil))
        gate.open()
        #expect(await waitUntil { lateAnswers.withLock { $0 } == [9] })
        await caller.value
    }
}
