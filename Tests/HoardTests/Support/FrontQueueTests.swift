import HoardTestSupport
import Testing

@testable import Hoard

/// The queues a backlog of shared-level writes makes long: `FrontQueue` (taken from the front in
/// O(1)) and `SharedLevel.Tickets` (its oldest ticket without a scan), each checked step by step
/// against the plain collection it replaces, across the points where the queue drops its taken
/// slots.
@Suite struct FrontQueueTests {
    @Test(arguments: [UInt64(1), 2, 3])
    func aFrontQueueTakesWhatAnArrayWouldInTheSameOrder(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var queue = FrontQueue<Int>()
        var model: [Int] = []
        var next = 0
        for step in 0..<40_000 {
            // Long runs of appends, then of takes, so that the queue grows past its compaction size
            // (1 024 taken, half the array) and empties again; a clear now and then.
            let appends = (step / 6_000) % 2 == 0
            let draw = Int.random(in: 0..<100, using: &random)
            if step % 9_001 == 9_000 {
                queue.removeAll()
                model.removeAll()
            } else if appends ? draw < 70 : draw < 30 {
                queue.append(next)
                model.append(next)
                next += 1
            } else {
                let taken = queue.popFirst()
                #expect(taken == (model.isEmpty ? nil : model.removeFirst()))
            }
            #expect(queue.count == model.count)
            #expect(queue.isEmpty == model.isEmpty)
            #expect(queue.first == model.first)
        }
        while let taken = queue.popFirst() { #expect(taken == model.removeFirst()) }
        #expect(model.isEmpty)
    }

    @Test(arguments: [UInt64(1), 2, 3])
    func ticketsTellTheOldestHeldAsTheSetsMinimumWould(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var tickets = SharedLevel.Tickets()
        var model = Set<UInt64>()
        var generation: UInt64 = 0
        for _ in 0..<30_000 {
            let draw = Int.random(in: 0..<100, using: &random)
            if draw < 45 || model.isEmpty {
                // Some generations are handed out and never held (a write that replaced a queued one).
                generation += UInt64.random(in: 1...3, using: &random)
                tickets.insert(generation)
                model.insert(generation)
            } else if draw < 95 {
                let gone = model.randomElement(using: &random)!
                tickets.remove(gone)
                model.remove(gone)
            } else {
                let gone = Array(model.shuffled(using: &random).prefix(5))
                tickets.subtract(gone)
                model.subtract(gone)
            }
            #expect(tickets.oldest == model.min())
            #expect(tickets.isEmpty == model.isEmpty)
        }
        for ticket in model { #expect(tickets.contains(ticket)) }
    }

    @Test func aTicketHeldForLongDoesNotKeepEveryLaterOneListed() {
        var tickets = SharedLevel.Tickets()
        // A write whose level never answers, then many that come and go.
        tickets.insert(1)
        for ticket in UInt64(2)...100_000 {
            tickets.insert(ticket)
            tickets.remove(ticket)
            #expect(tickets.listedCount <= 1_100)
        }
        #expect(tickets.oldest == 1)
        tickets.remove(1)
        #expect(tickets.oldest == nil && tickets.isEmpty)
    }
}
