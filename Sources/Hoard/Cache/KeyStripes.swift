/// Locks that make each change to a key atomic across the memory and disk levels.
///
/// A set must update the disk level's pending table and memory as one step: otherwise two sets of
/// one key could leave memory holding one value and disk the other, and a reader that found the
/// old value on disk could put it in memory after a newer set. Each key maps to one of a few stripes;
/// a stripe holds a lock and a count of the changes made under it. A reader notes the count before
/// going to disk and puts what it read into memory only if the count has not moved.
///
/// Every method takes the key's hash value (`key.hashValue`), so that a set hashes its key once for
/// the stripe and the memory store.
@usableFromInline
final class KeyStripes: Sendable {
    @usableFromInline static var stripeCount: Int { 16 }
    /// One lock per stripe, each guarding the stripe's change count.
    @usableFromInline let locks = LockArray(count: KeyStripes.stripeCount)

    @usableFromInline
    init() {}

    @inlinable
    func stripe(for hash: Int) -> Int {
        Int(UInt(bitPattern: hash) % UInt(Self.stripeCount))
    }

    /// Runs a change to the key with hash value `hash` under its stripe's lock, counting it.
    @inlinable
    func change<Result>(_ hash: Int, _ body: () -> Result) -> Result {
        let stripe = stripe(for: hash)
        return locks.withLock(stripe) {
            locks.counter(stripe).pointee &+= 1
            return body()
        }
    }

    /// The number of changes made so far under the stripe of the key with hash value `hash`.
    func changes(_ hash: Int) -> UInt64 {
        let stripe = stripe(for: hash)
        return locks.withLock(stripe) { locks.counter(stripe).pointee }
    }

    /// Runs `body` under the stripe's lock if no change was made under it since `changes`.
    func ifUnchanged<Result>(_ hash: Int, since changes: UInt64, _ body: () -> Result?) -> Result? {
        let stripe = stripe(for: hash)
        return locks.withLock(stripe) { locks.counter(stripe).pointee == changes ? body() : nil }
    }

    /// Runs a change to every key (a clear) holding every stripe's lock, counting it in each.
    @discardableResult
    func changeAll<Result>(_ body: () -> Result) -> Result {
        for stripe in 0..<Self.stripeCount { locks.lock(stripe) }
        defer { for stripe in (0..<Self.stripeCount).reversed() { locks.unlock(stripe) } }
        for stripe in 0..<Self.stripeCount { locks.counter(stripe).pointee &+= 1 }
        return body()
    }
}
