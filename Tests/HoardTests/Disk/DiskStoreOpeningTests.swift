import Foundation
import HoardTestSupport
import Testing

@testable import Hoard

/// Opening containers at the same time: one container's listing and index rebuild hold up no other
/// container, and two openings of one container share one store.
///
/// A test hook holds an opening halfway through its rebuild (on a plain thread) while the other
/// opening runs; every wait is time-boxed, so a regression fails instead of hanging the run. Nothing
/// here measures time.
@Suite(.timeLimit(.minutes(10)))
struct DiskStoreOpeningTests {
    init() { TestLog.install() }

    /// How long a step may take before it counts as stuck.
    static let seconds = 600.0
    static let entryCount = 1_000
    static let options = DiskStore.Options(capacity: 10_000, policy: .lru)

    /// Writes `count` entries into the container at `url` through a store of its own, waits until
    /// that store has closed, then deletes the saved index: the next opening reads every entry file.
    private func makeContainerWithoutIndex(at url: URL, count: Int) async throws {
        let closing: DispatchGroup
        do {
            let store = try DiskStore(at: url, options: Self.options)
            for index in 0..<count {
                let text = "value \(index)"
                let value = PendingValue(value: text, serialize: { Data(text.utf8) }, expiresAt: .never)
                _ = store.enqueueWrite(DiskKey("key \(index)"), value: value, observer: nil)
            }
            await store.flush()
            closing = store.closing.group
        }
        // The writer lets go of the store just after the flush returns; its `deinit` must not save
        // the index again once it is deleted.
        #expect(await waitUntilClosed(closing))
        try FileManager.default.removeItem(at: url.appendingPathComponent(ContainerFile.index))
    }

    /// Opens the shared store of `url`; `nil` when the opening throws.
    private static func open(_ url: URL) -> DiskStore? {
        try? DiskStore.shared(at: url, options: options)
    }

    /// A rebuild reads the files while it lists them, a chunk at a time: across several chunks, it
    /// keeps every intact entry and removes exactly the damaged files, wherever they fall.
    @Test func aRebuildOfManyFilesKeepsTheIntactOnesAndRemovesTheDamaged() async throws {
        let folder = TemporaryDirectory()
        let url = folder.container()
        let count = 2_600
        try await makeContainerWithoutIndex(at: url, count: count)
        let damaged = Set(stride(from: 5, to: count, by: 97))
        for index in damaged {
            let path = url.appendingPathComponent(DiskKey("key \(index)").fileName).path
            try RawFiles.write(Array("not an entry".utf8), to: path)
        }
        let store = try DiskStore(at: url, options: Self.options)
        #expect(store.count == count - damaged.count)
        var wrong: [Int] = []
        for index in 0..<count {
            let read = store.read(DiskKey("key \(index)"), now: { 0 }) { String(decoding: $0, as: UTF8.self) }
            if read.foundValue != (damaged.contains(index) ? nil : "value \(index)") { wrong.append(index) }
        }
        #expect(wrong.isEmpty)
        #expect(folder.entryFiles().count == count - damaged.count)
        let kept = Set(folder.entryFiles())
        #expect(damaged.allSatisfy { !kept.contains(DiskKey("key \($0)").fileName) })
    }

    @Test func aContainerOpensWhileAnotherRebuildsItsIndex() async throws {
        let folder = TemporaryDirectory()
        let big = folder.container("big")
        let small = folder.container("small")
        try await makeContainerWithoutIndex(at: big, count: Self.entryCount)
        let bigPath = try Directory.create(at: big)
        let gate = ThreadGate()
        let rebuilding = DispatchSemaphore(value: 0)
        DiskStore.testHooks.set(
            { event in
                guard event == .rebuilding else { return }
                rebuilding.signal()
                gate.wait()
            },
            at: bigPath
        )
        defer {
            gate.open()
            DiskStore.testHooks.set(nil, at: bigPath)
        }

        let bigStore = Protected<DiskStore?>(nil)
        let bigOpened = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let store = Self.open(big)
            // `build()` returns at once; the count waits for the index, which is being rebuilt.
            _ = store?.count
            bigStore.withLock { $0 = store }
            bigOpened.signal()
        }
        guard await signalled(rebuilding, within: Self.seconds) else {
            Issue.record("the rebuild of the big container did not start")
            return
        }

        // The big container's opening is held halfway through its rebuild: the small one opens all the same.
        let smallStore = Protected<DiskStore?>(nil)
        let smallOpened = await finishesInTime(seconds: Self.seconds) {
            let store = Self.open(small)
            smallStore.withLock { $0 = store }
        }
        #expect(smallOpened, "opening a container waited for another container's rebuild")
        #expect(smallStore.withLock { $0 } != nil)
        #expect(bigStore.withLock { $0 } == nil)  // its index is still held

        gate.open()
        #expect(await signalled(bigOpened, within: Self.seconds))
        #expect(bigStore.withLock { $0?.count } == Self.entryCount)
    }

    @Test func oneContainerOpenedTwiceAtOnceIsOneStoreWithEveryEntry() async throws {
        let folder = TemporaryDirectory()
        let url = folder.container()
        try await makeContainerWithoutIndex(at: url, count: Self.entryCount)
        let path = try Directory.create(at: url)
        let gate = ThreadGate()
        let rebuilding = DispatchSemaphore(value: 0)
        let rebuilds = Counter()
        DiskStore.testHooks.set(
            { event in
                switch event {
                case .rebuilding:
                    rebuilds.increment()
                    rebuilding.signal()
                    gate.wait()
                case .waitingForAnotherOpening, .loadingInBackground, .loadedBeforeTelling:
                    break
                }
            },
            at: path
        )
        defer {
            gate.open()
            DiskStore.testHooks.set(nil, at: path)
        }

        let stores = Protected<[DiskStore]>([])
        let finished = DispatchSemaphore(value: 0)
        let open: @Sendable () -> Void = {
            if let store = Self.open(url) {
                // `build()` returns at once; the count waits for the one index load.
                _ = store.count
                stores.withLock { $0.append(store) }
            }
            finished.signal()
        }
        Thread.detachNewThread(open)
        guard await signalled(rebuilding, within: Self.seconds) else {
            Issue.record("the rebuild did not start")
            return
        }
        Thread.detachNewThread(open)
        // The second opening shares the first one's store, and waits for its rebuild instead of
        // rebuilding too (or, if it came while the first was being published, waits for that).
        // The gate holds the rebuild: neither opening's count has returned.
        #expect(stores.withLock { $0.isEmpty })

        gate.open()
        #expect(await signalled(finished, within: Self.seconds))
        #expect(await signalled(finished, within: Self.seconds))
        let opened = stores.withLock { $0 }
        #expect(opened.count == 2)
        #expect(opened.first === opened.last)
        #expect(rebuilds.value == 1)
        for store in opened {
            #expect(store.count == Self.entryCount)
            #expect(Set(store.allKeys()) == Set((0..<Self.entryCount).map { "key \($0)" }))
        }
        if let store = opened.first, case .stored(let entry) = store.lookup(DiskKey("key 7")) {
            #expect(entry.payload == Data("value 7".utf8))
        } else {
            Issue.record("key 7 is not on disk")
        }
    }
}
