/// The eviction order of a disk store's entry files, with the total size of those files.
///
/// Every change to the entries goes through it, so ``byteCount`` is always the sum of the sizes it
/// holds. Not thread-safe: the store holds its state lock around every call.
struct DiskEntryIndex {
    private var order: EvictionIndex<SHA256Digest, DiskEntryInfo>
    /// The sum of the entries' file sizes, in bytes, in 64 bits with wrapping arithmetic.
    ///
    /// An index file is not trusted to be sane, and sizes read from a forged one must not trap (nor
    /// overflow a 32-bit `Int`). The sum is exact whenever the real one fits in 63 bits.
    private var bytes: Int64 = 0

    /// The sum of the entries' file sizes, in bytes (clamped to `Int`'s range).
    var byteCount: Int { Int(clamping: bytes) }

    init(policy: EvictionPolicy, capacity: Int) {
        order = EvictionIndex(policy: policy, capacity: capacity)
    }

    /// The number of entries.
    var count: Int { order.count }

    /// Whether an entry exists for `key`, without counting an access.
    func contains(_ key: SHA256Digest) -> Bool { order.contains(key) }

    /// The entry for `key`, without counting an access.
    func peek(_ key: SHA256Digest) -> DiskEntryInfo? { order.peek(key) }

    /// Every entry with its access count, next victim first.
    var entriesInEvictionOrder: [(key: SHA256Digest, payload: DiskEntryInfo, count: UInt32)] {
        order.entriesInEvictionOrder
    }

    /// Returns the entry for `key` and counts an access to it.
    mutating func access(_ key: SHA256Digest) -> DiskEntryInfo? { order.access(key) }

    /// Stores the entry for `key`, counting an access.
    mutating func upsert(_ info: DiskEntryInfo, forKey key: SHA256Digest) {
        if let old = order.upsert(info, forKey: key) { subtract(old.size) }
        add(info.size)
    }

    /// Adds an entry with a restored access count (see `EvictionIndex.append(_:forKey:count:)`).
    mutating func append(_ info: DiskEntryInfo, forKey key: SHA256Digest, count: UInt32) {
        if let old = order.peek(key) { subtract(old.size) }
        order.append(info, forKey: key, count: count)
        add(info.size)
    }

    /// Removes the entry for `key`; returns it.
    @discardableResult
    mutating func removeValue(forKey key: SHA256Digest) -> DiskEntryInfo? {
        guard let old = order.removeValue(forKey: key) else { return nil }
        subtract(old.size)
        return old
    }

    /// Removes every entry.
    mutating func removeAll() {
        order.removeAll()
        bytes = 0
    }

    private mutating func add(_ size: Int) { bytes &+= Int64(truncatingIfNeeded: size) }
    private mutating func subtract(_ size: Int) { bytes &-= Int64(truncatingIfNeeded: size) }

    /// Checks the eviction order's links and counts (see `EvictionIndex.checkInvariants()`).
    func checkInvariants() { order.checkInvariants() }

    /// An entry removed to make room, and which limit it made room for.
    typealias Victim = (key: SHA256Digest, payload: DiskEntryInfo, reason: EvictionReason)

    /// Removes entries in eviction order, never `spared`, until `extraCount` more entries and
    /// `extraBytes` more bytes fit within `capacity` and `byteLimit`; returns the removed entries.
    ///
    /// - Complexity: O(1) per victim; O(n) once when `spared` is the next victim by the policy.
    mutating func makeRoom(
        forCount extraCount: Int,
        bytes extraBytes: Int,
        capacity: Int,
        byteLimit: Int?,
        sparing spared: SHA256Digest? = nil
    ) -> [Victim] {
        /// The limit that does not hold yet, or `nil` when both hold.
        func exceededLimit(_ index: DiskEntryIndex) -> EvictionReason? {
            if index.count + extraCount > capacity { return .capacity }
            if let byteLimit,
                index.bytes &+ Int64(truncatingIfNeeded: extraBytes) > Int64(truncatingIfNeeded: byteLimit)
            {
                return .cost
            }
            return nil
        }
        var victims: [Victim] = []
        while let reason = exceededLimit(self), let victim = order.victim {
            if victim.key == spared {
                // The spared entry comes first: take the others in their order.
                for entry in order.entriesInEvictionOrder where entry.key != spared {
                    guard let reason = exceededLimit(self) else { break }
                    removeValue(forKey: entry.key)
                    victims.append((entry.key, entry.payload, reason))
                }
                break
            }
            _ = order.popVictim()
            subtract(victim.payload.size)
            victims.append((victim.key, victim.payload, reason))
        }
        return victims
    }
}

// Safe because the index is a value: its only reference-typed storage is the eviction index's
// buffers, which every change to the eviction index copies first when another copy shares them (one
// `isKnownUniquelyReferenced` check of its owner token, see `EvictionIndex.makeUnique()`), so two
// copies on two threads never write one allocation. (The store keeps its index in its `Locked`
// state and never hands it out; the conformance lets that state be `Sendable`.)
extension DiskEntryIndex: @unchecked Sendable {}
