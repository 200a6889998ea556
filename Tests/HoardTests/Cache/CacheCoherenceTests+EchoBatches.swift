import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Echo checks that come while a read-back is under way wait for the next, which reads them all in
/// one request of a level that can (`MGET`): the same decisions, fewer requests.
extension CacheCoherenceTests {
    /// A coherent cache on `level`, tracking confirmed, with `count` confirmed saves "k0"… and the
    /// read-back of "k0"'s echo held at the returned gate: the echoes announced next wait behind it.
    private func cacheWithAHeldReadBack(
        _ folder: TemporaryDirectory,
        _ level: FakeBatchReadingLevel,
        saves count: Int
    ) async throws -> (Cache<String>, Gate) {
        let cache = try folder.stringBuilder().sharedLevel(level)
            .coherence(.invalidations(maxLocalAge: .seconds(86_400))).build()
        #expect(await waitUntil { !cache.isClearingDisk })
        level.base.announce(.tracking)
        #expect(await waitUntil { cache.isCoherent })
        for index in 0..<count { try await cache.save("v\(index)", forKey: "k\(index)") }
        await cache.flush()
        let held = level.base.holdNextGet()
        level.base.announce(.keys(["k0"]))
        #expect(await waitUntil { level.base.getsStarted == 1 })
        return (cache, held)
    }

    @Test func echoChecksThatWaitBehindAReadBackGoInOneRequest() async throws {
        let folder = TemporaryDirectory()
        let level = FakeBatchReadingLevel()
        let (cache, held) = try await cacheWithAHeldReadBack(folder, level, saves: 21)
        level.base.announce(.keys((1..<21).map { "k\($0)" }))
        #expect(cache.echoChecksUnderWay == 21)
        held.open()
        #expect(await waitUntil { cache.echoChecksUnderWay == 0 })
        #expect(level.batches == [(1..<21).map { "k\($0)" }])
        #expect(level.base.getsStarted == 1)
        // Every save is still held in memory and on disk: the server has exactly what was written.
        for index in 0..<21 { #expect(cache.memory?.value(forKey: "k\(index)")?.value == "v\(index)") }
        await cache.flush()
        #expect(folder.entryFiles().count == 21)
    }

    @Test func aFailedBatchReadDropsEveryCopyItChecked() async throws {
        let folder = TemporaryDirectory()
        let level = FakeBatchReadingLevel()
        let (cache, held) = try await cacheWithAHeldReadBack(folder, level, saves: 5)
        level.failBatches()
        level.base.announce(.keys(["k1", "k2", "k3", "k4"]))
        held.open()
        #expect(await waitUntil { cache.echoChecksUnderWay == 0 })
        #expect(level.batches.count == 1)
        // "k0" was read alone and confirmed; the others could not be checked, so they go.
        #expect(cache.memory?.value(forKey: "k0")?.value == "v0")
        for index in 1..<5 { #expect(cache.entry(forKey: "k\(index)") == nil) }
        await cache.flush()
        #expect(folder.entryFiles().count == 1)
    }

    @Test func anotherChangeOfAKeyWaitingForItsReadBackDropsItAtOnceAndForGood() async throws {
        let folder = TemporaryDirectory()
        let level = FakeBatchReadingLevel()
        let (cache, held) = try await cacheWithAHeldReadBack(folder, level, saves: 3)
        level.base.announce(.keys(["k1", "k2"]))
        // A second announcement of "k1" while its check waits: no written bytes are left to keep it.
        level.base.announce(.keys(["k1"]))
        #expect(cache.entry(forKey: "k1") == nil)
        held.open()
        #expect(await waitUntil { cache.echoChecksUnderWay == 0 })
        // The read-back finds the bytes written, yet never puts the dropped copy back.
        #expect(level.batches == [["k1", "k2"]])
        #expect(cache.entry(forKey: "k1") == nil)
        #expect(cache.memory?.value(forKey: "k2")?.value == "v2")
    }

    /// Every key was read back once, alone or in a request, and no request held more than
    /// ``EchoChecks/requestLimits`` allow (a key alone may be larger).
    private func expectEachReadBackOnceWithinLimits(_ level: FakeBatchReadingLevel, keys: [String]) {
        let read = level.batches.joined() + level.gets.filter { $0 != "k0" }
        #expect(read.sorted() == keys.sorted())
        for batch in level.batches {
            #expect(batch.count <= EchoChecks.requestLimits.keys)
        }
    }

    @Test func aLongBurstOfEchoesIsReadBackInRequestsOfBoundedSize() async throws {
        let folder = TemporaryDirectory()
        let level = FakeBatchReadingLevel()
        let count = EchoChecks.requestLimits.keys + 45
        let (cache, held) = try await cacheWithAHeldReadBack(folder, level, saves: count)
        let keys = (1..<count).map { "k\($0)" }
        level.base.announce(.keys(keys))
        held.open()
        #expect(await waitUntil { cache.echoChecksUnderWay == 0 })
        expectEachReadBackOnceWithinLimits(level, keys: keys)
        // More than one request carries, so more than one was made.
        #expect(level.batches.count + level.gets.count - 1 >= 2)
        // Every copy kept: on disk, which holds them all.
        await cache.flush()
        #expect(folder.entryFiles().count == count)
        #expect(cache.memory?.value(forKey: "k\(count - 1)")?.value == "v\(count - 1)")
    }

    @Test func largeOwnWritesAreReadBackAFewAtATime() async throws {
        let folder = TemporaryDirectory()
        let level = FakeBatchReadingLevel()
        let (cache, held) = try await cacheWithAHeldReadBack(folder, level, saves: 1)
        // Values of 0.4 of a request's bytes: two fit in one request, a third does not.
        let large = String(repeating: "x", count: EchoChecks.requestLimits.bytes * 2 / 5)
        for index in 1...5 { try await cache.save(large + "\(index)", forKey: "k\(index)") }
        await cache.flush()
        level.base.announce(.keys((1...5).map { "k\($0)" }))
        held.open()
        #expect(await waitUntil { cache.echoChecksUnderWay == 0 })
        expectEachReadBackOnceWithinLimits(level, keys: (1...5).map { "k\($0)" })
        for batch in level.batches { #expect(batch.count <= 2) }
        for index in 1...5 { #expect(cache.memory?.value(forKey: "k\(index)")?.value == large + "\(index)") }
    }

    @Test func anOwnWriteLargerThanARequestsBytesIsReadBackAlone() async throws {
        let folder = TemporaryDirectory()
        let level = FakeBatchReadingLevel()
        let (cache, held) = try await cacheWithAHeldReadBack(folder, level, saves: 1)
        let huge = String(repeating: "x", count: EchoChecks.requestLimits.bytes + 10)
        for index in 1...3 { try await cache.save(huge + "\(index)", forKey: "k\(index)") }
        await cache.flush()
        level.base.announce(.keys(["k1", "k2", "k3"]))
        held.open()
        #expect(await waitUntil { cache.echoChecksUnderWay == 0 })
        #expect(level.batches.isEmpty)
        #expect(level.base.getsStarted == 4)
        for index in 1...3 { #expect(cache.memory?.value(forKey: "k\(index)")?.value == huge + "\(index)") }
    }

    /// Checks that one request cannot carry do not wait behind the read-back under way: another
    /// starts, while small ones keep waiting for the one (see
    /// ``echoChecksThatWaitBehindAReadBackGoInOneRequest()``).
    @Test func checksMoreThanOneRequestCarriesAreReadBackAtOnce() async throws {
        let folder = TemporaryDirectory()
        let level = FakeBatchReadingLevel()
        let (cache, held) = try await cacheWithAHeldReadBack(folder, level, saves: 1)
        // Each larger than a request: whenever one waits with only the held read-back running, it
        // starts another; while another runs, that one takes it.
        let large = String(repeating: "x", count: EchoChecks.requestLimits.bytes + 10)
        for index in 1...4 { try await cache.save(large + "\(index)", forKey: "k\(index)") }
        await cache.flush()
        level.base.announce(.keys((1...4).map { "k\($0)" }))
        // "k0"'s read-back is still held: the others are read meanwhile, each alone.
        #expect(await waitUntil { level.base.getsStarted == 5 && cache.echoChecksUnderWay == 1 })
        for index in 1...4 { #expect(cache.memory?.value(forKey: "k\(index)")?.value == large + "\(index)") }
        held.open()
        #expect(await waitUntil { cache.echoChecksUnderWay == 0 })
        #expect(cache.memory?.value(forKey: "k0")?.value == "v0")
        // Every loop has stopped, with nothing counted as waiting.
        #expect(await waitUntil { cache.echoChecks.withLock { $0.readers == 0 && $0.waitingBytes == 0 } })
    }
}
