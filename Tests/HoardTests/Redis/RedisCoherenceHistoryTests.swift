import Foundation
import HoardTestSupport
import Testing

@testable import Hoard
@testable import HoardRedis

/// Random concurrent histories of two coherent caches (each with its own connections and tracking
/// connection) over one server, with the reader's tracking connection killed at random moments,
/// checked for linearizability as ``LinearizabilityTests`` does.
///
/// The writer sets (`save`) and removes (`removeValue`, then `flush()`) keys 1…3 and reads them; a
/// write counts as done once the server acknowledged it and the reader no longer holds an older
/// value in memory (that wait is the invalidation latency the README reports). The reader reads at
/// the same time. Its reads that begin between a kill and the moment it has dropped its local copies
/// (the documented window after a connection loss) are left out; every other read must fit.
@Suite(
    .enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason),
    .serialized,
    .timeLimit(.minutes(5))
)
struct RedisCoherenceHistoryTests {
    typealias Event = LinearizabilityTests.Event
    typealias Recorder = LinearizabilityTests.Recorder

    @Test func historiesWithKilledTrackingConnectionsAreLinearizable() async throws {
        let server = try RedisTestServer.required()
        let folder = TemporaryDirectory()
        let namespace = "history-\(UUID().uuidString)"
        let readerName = "history-reader-\(UUID().uuidString.prefix(8))"
        let writer = try RedisCoherenceTests.coherentCache(
            folder,
            "w",
            port: server.port,
            namespace: namespace,
            clientName: "history-writer"
        )
        let reader = try RedisCoherenceTests.coherentCache(
            folder,
            "r",
            port: server.port,
            namespace: namespace,
            clientName: readerName
        )
        let admin = try RedisCoherenceTests.admin(server.port)
        #expect(await waitUntil { writer.isCoherent && reader.isCoherent })
        var random = SplitMix64(seed: 18)
        var excluded = 0
        var kills = 0
        for history in 0..<(30 * StressScale.rounds) {
            let recorder = Recorder()
            func key(_ number: Int) -> String { "h\(history)-k\(number)" }
            let writes: [(key: Int, value: Int?)] = (0..<8).map { step in
                (Int.random(in: 1...3, using: &random), Int.random(in: 0..<4, using: &random) == 0 ? nil : step + 1)
            }
            let reads = (0..<12).map { _ in Int.random(in: 1...3, using: &random) }
            let killsTracking = Int.random(in: 0..<3, using: &random) != 0
            let killDelay = Int.random(in: 0..<200, using: &random)
            let windows = Protected([ClosedRange<Int>]())

            async let writing: Void = {
                var written: [Int: [Int]] = [:]
                for (number, value) in writes {
                    let invoked = recorder.tick()
                    if let value {
                        try? await writer.save(String(value), forKey: key(number))
                    } else {
                        writer.removeValue(forKey: key(number))
                        await writer.flush()
                    }
                    let older = written[number, default: []].map(String.init)
                    if let value { written[number, default: []].append(value) }
                    // Done once the reader no longer holds an older value of the key.
                    #expect(
                        await waitUntil {
                            reader.memory?.peek(key(number)).map { older.contains($0.value) } != true
                        }
                    )
                    let operation: LinearizabilityTests.Operation =
                        value.map { .set(key: number, value: $0) } ?? .remove(key: number)
                    recorder.record(
                        Event(
                            thread: 0,
                            operation: operation,
                            result: nil,
                            invoked: invoked,
                            responded: recorder.tick()
                        )
                    )
                    let readInvoked = recorder.tick()
                    let read = try? await writer.getOrFetch(forKey: key(number))
                    recorder.record(
                        Event(
                            thread: 0,
                            operation: .get(key: number),
                            result: read.flatMap { Int($0) },
                            invoked: readInvoked,
                            responded: recorder.tick()
                        )
                    )
                }
            }()
            async let killing: Int = {
                guard killsTracking else { return 0 }
                for _ in 0..<killDelay { await Task.yield() }
                // The reader's tracking connection dies; its reads until it has dropped its local
                // copies may be stale.
                let flushes = reader.statistics.coherenceFlushes
                let start = recorder.tick()
                let ids = (try? await RedisCoherenceTests.trackingClients(admin, readerName)) ?? []
                for id in ids { _ = try? await admin.send(RESPCommand("CLIENT", ["KILL", "ID", id])) }
                guard !ids.isEmpty else { return 0 }
                #expect(await waitUntil { reader.statistics.coherenceFlushes > flushes })
                windows.withLock { $0.append(start...recorder.tick()) }
                return 1
            }()
            for number in reads {
                let invoked = recorder.tick()
                let read = try? await reader.getOrFetch(forKey: key(number))
                recorder.record(
                    Event(
                        thread: 1,
                        operation: .get(key: number),
                        result: read.flatMap { Int($0) },
                        invoked: invoked,
                        responded: recorder.tick()
                    )
                )
            }
            await writing
            kills += await killing
            let lossWindows = windows.withLock { $0 }
            let events = recorder.events.filter { event in
                guard event.thread == 1 else { return true }
                let isInWindow = lossWindows.contains { $0.contains(event.invoked) }
                if isInWindow { excluded += 1 }
                return !isInWindow
            }
            #expect(
                LinearizabilityTests.isLinearizable(events),
                "history \(history):\n\(events.sorted { $0.invoked < $1.invoked }.map(\.description).joined(separator: "\n"))"
            )
            // The reader tracks again before the next history.
            #expect(await waitUntil { reader.isCoherent })
        }
        #expect(kills > 0)
        print(
            "Coherent histories: \(30 * StressScale.rounds), kills \(kills), reads left out in a loss window \(excluded)"
        )
    }
}
