/// Locks that make each change to a key atomic across the memory and disk levels.
///
/// A set must update the disk level's pending table and memory as one step: otherwise two sets of
/// one key could leave memory holding one value and disk the other, and a reader that found the
/// old value on disk could put it in memory after a newer set. Each key maps to one of a few stripes;
/// a stripe holds a lock and a count of the changes made under it. A reader notes the count before
/// going to disk and puts what it read into memory only if the count has not moved.
@usableFromInline
final class KeyStripes: Sendable {
    @usableFromInline static let stripeCount = 16
    @usableFromInline let stripes: [Locked<UInt64>]

    @usableFromInline
    init() {
        stripes = (0..<Self.stripeCount).map { _ in Locked(0) }
    }

    @inlinable
    func stripe(for key: String) -> Locked<UInt64> {
        stripes[Int(UInt(bitPattern: key.hashValue) % UInt(Self.stripeCount))]
    }

    /// Runs a change to `key` under its stripe's lock, counting it.
    @inlinable
    func change<Result>(_ key: String, _ body: () -> Result) -> Result {
        stripe(for: key).withLock { changes in
            changes &+= 1
            return body()
        }
    }

    /// The number of changes made so far under `key`'s stripe.
    func changes(_ key: String) -> UInt64 {
        stripe(for: key).withLock { $0 }
    }

    /// Runs `body` under `key`'s stripe's lock if no change was made under it since `changes`.
    func ifUnchanged<Result>(_ key: String, since changes: UInt64, _ body: () -> Result?) -> Result? {
        stripe(for: key).withLock { $0 == changes ? body() : nil }
    }

    /// Runs a change to every key (a clear) holding every stripe's lock, counting it in each.
    @discardableResult
    func changeAll<Result>(_ body: () -> Result) -> Result {
        for stripe in stripes { stripe.lock.lock() }
        defer { for stripe in stripes.reversed() { stripe.lock.unlock() } }
        for stripe in stripes { stripe.state &+= 1 }
        return body()
    }
}

/// Whether the current thread is inside a memory-eviction callback.
enum EvictionCallback {
    /// Set while a delegate hears of a memory eviction.
    ///
    /// A read made from that callback is not copied
    /// into memory: the copy would evict another entry, whose callback could read it back, and so on
    /// without end.
    @TaskLocal static var isRunning = false
}
