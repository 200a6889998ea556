/// Locks that make each change to a key atomic across the memory and disk levels.
///
/// A set must update the disk level's pending table and memory as one step: otherwise two sets of
/// one key could leave memory holding one value and disk the other, and a reader that found the
/// old value on disk could put it in memory after a newer set. Each key maps to one of a few stripes;
/// a stripe holds a lock and a count of the changes made under it. A reader notes the count before
/// going to disk and puts what it read into memory only if the count has not moved.
///
/// A stripe's count is the sum of two counts it guards: one for clears (``changeAll(_:)``), in the
/// lock's own slot, and one of ``countCount`` finer counts, chosen by the key's hash, for a change
/// of one key. A change to one key so moves the count of 1 key in 64 of its stripe, not of the whole
/// stripe: a coherent cache, whose fills are checked against every invalidation the server sends
/// while they are in flight, rejects 64 times fewer fills for another key's change. Both counts
/// only grow, so their sum moves whenever either does.
///
/// A fill (a value read from the shared level or fetched, put into the local levels) is checked more
/// finely still: from ``beginFill(_:)`` to ``endFill(_:)`` its stripe counts each change of its very
/// key (by hash value) in a table of the keys with fills in flight, and ``ifUnchanged(since:_:)``
/// rejects it for a change of that key or a clear, never for another key's change. In a coherent
/// fleet every invalidation the server sends is such a change, most of them of keys that other
/// fills are not reading.
///
/// Every method takes the key's hash value (`key.hashValue`), so that a set hashes its key once for
/// the stripe and the memory store.
@usableFromInline
final class KeyStripes: @unchecked Sendable {
    // Safe because each of `counts` is read and written only under its stripe's lock (count `i`
    // under lock `i % stripeCount`), each of `fills` likewise (table `i` under lock `i`), the
    // pointers themselves never change, and `clearsUnderWay` is written only holding every lock
    // (in `changeAll`) and read holding one of them.

    /// The fills of one key in flight, and the changes of the key since the first of them began.
    @usableFromInline
    struct KeyFills {
        @usableFromInline var count = 0
        @usableFromInline var changes: UInt64 = 0

        @usableFromInline init() {}
    }

    /// What a fill noted when it began (see ``beginFill(_:)``).
    struct FillToken: Sendable {
        /// The key's hash value.
        let hash: Int
        /// The stripe's clear count.
        let clears: UInt64
        /// The key's changes in the table of fills in flight.
        let changes: UInt64
        /// The key's finer count (shared with other keys), for the tally only.
        let sharedCount: UInt64
    }

    @usableFromInline static var stripeCount: Int { 16 }
    /// The number of finer counts, a multiple of ``stripeCount``.
    @usableFromInline static var countCount: Int { 1_024 }
    /// One lock per stripe, each guarding the stripe's clear count.
    @usableFromInline let locks = LockArray(count: KeyStripes.stripeCount)
    /// The finer change counts, count `i` guarded by lock `i % stripeCount`.
    @usableFromInline let counts: UnsafeMutablePointer<UInt64>
    /// Per stripe, the keys (by hash value) with fills in flight, table `i` guarded by lock `i`.
    @usableFromInline let fills: UnsafeMutablePointer<[Int: KeyFills]>
    /// What the cache did with its invalidations and fills (see ``CoherenceTally``); taken after the
    /// stripe's lock is released.
    let tally = Locked(CoherenceTally())
    /// The clears begun with ``beginClear()`` and not ended yet: while there is one, no fill is
    /// stored.
    private var clearsUnderWay = 0

    @usableFromInline
    init() {
        counts = .allocate(capacity: Self.countCount)
        counts.initialize(repeating: 0, count: Self.countCount)
        fills = .allocate(capacity: Self.stripeCount)
        fills.initialize(repeating: [:], count: Self.stripeCount)
    }

    deinit {
        counts.deallocate()
        fills.deinitialize(count: Self.stripeCount)
        fills.deallocate()
    }

    /// The lock of the key with hash value `hash`.
    @inlinable
    func stripe(for hash: Int) -> Int {
        Int(UInt(bitPattern: hash) % UInt(Self.stripeCount))
    }

    /// The finer count of the key with hash value `hash`, guarded by its stripe's lock.
    @inlinable
    func count(for hash: Int) -> UnsafeMutablePointer<UInt64> {
        counts + Int(UInt(bitPattern: hash) % UInt(Self.countCount))
    }

    /// Runs a change to the key with hash value `hash` under its stripe's lock, counting it.
    @inlinable
    func change<Result>(_ hash: Int, _ body: () -> Result) -> Result {
        let stripe = stripe(for: hash)
        return locks.withLock(stripe) {
            count(for: hash).pointee &+= 1
            if !fills[stripe].isEmpty { fills[stripe][hash]?.changes &+= 1 }
            return body()
        }
    }

    /// Notes a fill of the key with hash value `hash` beginning; each change of that key is counted
    /// for it until ``endFill(_:)``.
    ///
    /// Call it before the fill reads, and end it once the fill is installed or given up.
    func beginFill(_ hash: Int) -> FillToken {
        let stripe = stripe(for: hash)
        return locks.withLock(stripe) {
            fills[stripe][hash, default: KeyFills()].count += 1
            return FillToken(
                hash: hash,
                clears: locks.counter(stripe).pointee,
                changes: fills[stripe][hash]?.changes ?? 0,
                sharedCount: count(for: hash).pointee
            )
        }
    }

    /// Notes a fill begun with ``beginFill(_:)`` ended: installed, rejected or given up.
    func endFill(_ token: FillToken) {
        let stripe = stripe(for: token.hash)
        locks.withLock(stripe) {
            guard let fill = fills[stripe][token.hash] else { return }
            if fill.count <= 1 { fills[stripe][token.hash] = nil } else { fills[stripe][token.hash]?.count -= 1 }
        }
    }

    /// Runs `body` under the stripe's lock if neither the fill's key changed nor a clear was made
    /// since `token` was taken, and no clear is under way; also says whether a key sharing its finer count changed (a fill
    /// that the finer count alone would have rejected), for the tally.
    func ifUnchanged<Result>(
        since token: FillToken,
        _ body: () -> Result?
    ) -> (result: Result?, sharedCountMoved: Bool) {
        let stripe = stripe(for: token.hash)
        return locks.withLock(stripe) {
            let sharedCountMoved = count(for: token.hash).pointee != token.sharedCount
            guard locks.counter(stripe).pointee == token.clears, fills[stripe][token.hash]?.changes == token.changes,
                clearsUnderWay == 0
            else { return (nil, sharedCountMoved) }
            return (body(), sharedCountMoved)
        }
    }

    /// The keys with fills in flight, for the tests.
    var fillsInFlight: Int {
        (0..<Self.stripeCount).reduce(0) { total, stripe in locks.withLock(stripe) { total + fills[stripe].count } }
    }

    /// The number of changes so far that count for the key with hash value `hash`: the clears, and
    /// the changes of the keys that share its finer count.
    func changes(_ hash: Int) -> UInt64 {
        let stripe = stripe(for: hash)
        return locks.withLock(stripe) { locks.counter(stripe).pointee &+ count(for: hash).pointee }
    }

    /// ``changes(_:)``, and what `body` reads under the same lock.
    @inlinable
    func changes<Result>(_ hash: Int, reading body: () -> Result) -> (UInt64, Result) {
        let stripe = stripe(for: hash)
        return locks.withLock(stripe) { (locks.counter(stripe).pointee &+ count(for: hash).pointee, body()) }
    }

    /// Runs `body` under the stripe's lock if no change that counts for the key was made since
    /// `changes`.
    @inlinable
    func ifUnchanged<Result>(_ hash: Int, since changes: UInt64, _ body: () -> Result?) -> Result? {
        let stripe = stripe(for: hash)
        return locks.withLock(stripe) {
            locks.counter(stripe).pointee &+ count(for: hash).pointee == changes ? body() : nil
        }
    }

    /// Runs a change to every key (a clear) holding every stripe's lock, counting it in each.
    @discardableResult
    func changeAll<Result>(_ body: () -> Result) -> Result {
        for stripe in 0..<Self.stripeCount { locks.lock(stripe) }
        defer { for stripe in (0..<Self.stripeCount).reversed() { locks.unlock(stripe) } }
        for stripe in 0..<Self.stripeCount { locks.counter(stripe).pointee &+= 1 }
        return body()
    }

    /// Begins a clear made in several steps (memory, disk, the shared level): counted as a change of
    /// every key now, and until ``endClear(_:)`` no fill is stored.
    ///
    /// A fill begun before the clear is so rejected however late in the clear it answers, and one
    /// begun during it (which may have read a level not cleared yet) is rejected too: it answers
    /// either before the end, or after the end counted another change of every key.
    func beginClear() {
        changeAll { clearsUnderWay += 1 }
    }

    /// Ends a clear begun with ``beginClear()``, counting another change of every key, and runs
    /// `body` (which drops what reads copied into memory during the clear) holding every lock.
    @discardableResult
    func endClear<Result>(_ body: () -> Result) -> Result {
        changeAll {
            clearsUnderWay -= 1
            return body()
        }
    }
}
