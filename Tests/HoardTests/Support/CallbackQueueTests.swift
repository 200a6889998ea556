import Dispatch
import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// The queue that delivers `asyncGet`'s completions for memory hits: order, where completions run,
/// and the way its thread lingers, returns to the pool and is scheduled again.
@Suite struct CallbackQueueTests {
    @Test func completionsFromOneThreadRunInTheOrderTheyWereGiven() async {
        let order = await onPlainThread { () -> [Int] in
            let seen = Protected<[Int]>([])
            let done = DispatchGroup()
            for number in 0..<10_000 {
                done.enter()
                CallbackQueue.deliver {
                    seen.withLock { $0.append(number) }
                    done.leave()
                }
            }
            _ = done.wait(timeout: .now() + 120)
            return seen.withLock { $0 }
        }
        #expect(order == Array(0..<10_000))
    }

    @Test func completionsRunOnTheSharedQueueOffTheCallersThread() async {
        let (onQueue, onCaller) = await onPlainThread { () -> (Bool, Bool) in
            let caller = pthread_self()
            let seen = Protected<(Bool, Bool)>((false, true))
            let done = DispatchSemaphore(value: 0)
            CallbackQueue.deliver {
                seen.withLock { $0 = (CallbackQueue.isCurrent, pthread_equal(pthread_self(), caller) != 0) }
                done.signal()
            }
            _ = done.wait(timeout: .now() + 120)
            return seen.withLock { $0 }
        }
        #expect(onQueue)
        #expect(!onCaller)
    }

    @Test func theThreadReturnsToThePoolWhenNothingArrivesAndIsScheduledForTheNextCompletion() async {
        for _ in 0..<3 {
            let done = DispatchSemaphore(value: 0)
            CallbackQueue.deliver { done.signal() }
            #expect(await signalled(done, within: 600))
            // Other suites deliver too; once they pause, the lingering thread gives up.
            #expect(await waitUntil { CallbackQueue.isIdle })
        }
    }

    @Test func manyThreadsEachWaitingForItsCompletionBeforeTheNextAreAllServed() async {
        let served = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<6 {
                group.addTask {
                    await onPlainThread {
                        var served = 0
                        let done = DispatchSemaphore(value: 0)
                        for _ in 0..<2_000 {
                            let ran = Protected(false)
                            CallbackQueue.deliver {
                                ran.withLock { $0 = CallbackQueue.isCurrent }
                                done.signal()
                            }
                            guard done.wait(timeout: .now() + 120) == .success else { break }
                            if ran.withLock({ $0 }) { served += 1 }
                        }
                        return served
                    }
                }
            }
            return await group.reduce(0, +)
        }
        #expect(served == 6 * 2_000)
    }
}
