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
/// write counts as done once the server acknowledged it and the reader has applied its invalidation
/// (the delay between the two is the invalidation latency the README reports). Between two writes,
/// the writer may kill the reader's tracking connection, and waits until the reader tracks again.
/// The reader reads all along. Its reads that begin between a kill and the moment it has dropped its
/// local copies (the documented window after a connection loss) are left out; every other read must
/// fit.
@Suite(
    .enabled(if: RedisTestServer.isEnabled, RedisTestServer.unavailableReason),
    .serialized,
    .timeLimit(.minutes(10))
)
struct RedisCoherenceHistoryTests {
    typealias Event = LinearizabilityTests.Event
    typealias Recorder = LinearizabilityTests.Recorder

    /// Hears the reader's invalidations right after the reader's cache applied them (a hub tells its
    /// subscribers in the order they subscribed).
    final class Heard: Sendable {
        private let counts = Protected([String: Int]())

        func count(_ key: String) -> Int { counts.withLock { $0[key, default: 0] } }

        func record(_ invalidation: CacheInvalidation) {
            guard case .keys(let keys) = invalidation else { return }
            counts.withLock { counts in for key in keys { counts[key, default: 0] += 1 } }
        }
    }

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
        let readerLevel = try RedisCoherenceTests.level(port: server.port, namespace: namespace, clientName: readerName)
        let reader = try folder.stringBuilder("r").sharedLevel(readerLevel).coherence(.invalidations).build()
        let heard = Heard()
        let subscription = try readerLevel.subscribeToInvalidations { heard.record($0) }
        defer { subscription.cancel() }
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
            // The writer kills the reader's tracking connection before this write (none when 8).
            let killBefore = Int.random(in: 0..<12, using: &random)
            let windows = Protected([ClosedRange<Int>]())

            async let writing: Int = {
                var exists: Set<Int> = []
                var killed = 0
                for (step, (number, value)) in writes.enumerated() {
                    if step == killBefore {
                        // The reader's tracking connection dies while the reader goes on reading;
                        // its reads until it has dropped its local copies may be stale.
                        let flushes = reader.statistics.coherenceFlushes
                        let start = recorder.tick()
                        let ids = (try? await RedisCoherenceTests.trackingClients(admin, readerName)) ?? []
                        for id in ids { _ = try? await admin.send(RESPCommand("CLIENT", ["KILL", "ID", id])) }
                        #expect(ids.count == 1)
                        #expect(await waitUntil { reader.statistics.coherenceFlushes > flushes })
                        windows.withLock { $0.append(start...recorder.tick()) }
                        // Writes resume once it tracks again: none of them goes unannounced.
                        #expect(await waitUntil { reader.isCoherent })
                        killed += 1
                    }
                    let before = heard.count(key(number))
                    let invoked = recorder.tick()
                    if let value {
                        try? await writer.save(String(value), forKey: key(number))
                    } else {
                        writer.removeValue(forKey: key(number))
                        await writer.flush()
                    }
                    // Done once the reader has dropped its copy: it heard of the change.
                    if value != nil || exists.contains(number) {
                        #expect(await waitUntil { heard.count(key(number)) > before })
                    }
                    if value != nil { exists.insert(number) } else { exists.remove(number) }
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
                return killed
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
            kills += await writing
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
