/// What the caches sharing a container in this process must hear of a change to it, and which
/// caches they are: keys that changed, or every key gone.
///
/// The one way caches are told of each other's changes, and of other processes'. Whoever changes
/// the container builds the news where it makes the change, often under a lock: the disk store
/// returns it when a write or a removal is queued (for every cache on the container but the one
/// that queued it), and gathers it while catching up with other processes' journal (for all of
/// them). It is delivered with ``deliver()`` once every lock is released; each cache then drops
/// those keys from its memory (see ``DiskStoreObserver``).
@usableFromInline
struct PeerNews: Sendable {
    /// The caches to tell.
    ///
    /// Empty when no other cache shares the container; for news the store gathers while catching
    /// up, filled in when it is delivered (see ``deliver(toEveryCacheOf:)``).
    @usableFromInline var peers: [any DiskStoreObserver] = []
    /// Whether every key went: the caches empty their memory, before they hear of ``changedKeys``.
    private(set) var isCleared = false
    /// The keys that changed, in order.
    private(set) var changedKeys: [String] = []
    /// Whether the news holds another process's clear, which the store counts as not told yet
    /// until it is delivered (see ``DiskStore/State/peerClearsUntold``).
    private(set) var holdsPeerClear = false
    /// The keys (by digest) other processes put or removed, once per change, which the store counts
    /// as not told yet until the news is delivered (see ``DiskStore/State/peerChangesUntold``).
    private(set) var untoldChanges: [SHA256Digest] = []

    /// News that `key` changed, for `peers`; no news (and no allocation) when there are none.
    static func changed(_ key: String, for peers: [any DiskStoreObserver]) -> PeerNews {
        guard !peers.isEmpty else { return PeerNews() }
        return PeerNews(peers: peers, changedKeys: [key])
    }

    /// News that every key went, for `peers`.
    static func cleared(for peers: [any DiskStoreObserver]) -> PeerNews {
        PeerNews(peers: peers, isCleared: true)
    }

    /// Adds a key that changed, after the others.
    mutating func append(_ key: String) {
        changedKeys.append(key)
    }

    /// Adds keys that changed, after the others.
    mutating func append(contentsOf keys: some Sequence<String>) {
        changedKeys.append(contentsOf: keys)
    }

    /// Notes that every key went: the keys that changed before need no telling any more.
    mutating func clear() {
        isCleared = true
        changedKeys.removeAll()
    }

    /// Notes that another process put or removed the key of `digest`, which the store counts as not
    /// told yet.
    mutating func changedByPeer(_ digest: SHA256Digest) {
        untoldChanges.append(digest)
    }

    /// Notes that another process cleared the container, as ``clear()``.
    ///
    /// - Returns: Whether the news held no other process's clear before: the store then counts one
    ///   more clear its caches are not told of yet.
    mutating func clearByPeer() -> Bool {
        clear()
        defer { holdsPeerClear = true }
        return !holdsPeerClear
    }

    /// Tells each of the peers, in order: that every key went, then each key that changed.
    ///
    /// Call it holding no lock: a cache takes its key stripes to drop what it heard of.
    func deliver() {
        guard !peers.isEmpty, isCleared || !changedKeys.isEmpty else { return }
        LockOrder.assertNoneHeld("telling another cache")
        for peer in peers {
            if isCleared { peer.diskStoreDidClear() }
            for key in changedKeys { peer.diskStoreDidChange(key: key) }
        }
    }

    /// Tells every cache of `store` of news it gathered from other processes.
    ///
    /// Every cache of this process must hear it; they are looked up only when there is news. Call
    /// it holding no lock.
    func deliver(toEveryCacheOf store: DiskStore) {
        // Also when no key is named (a removal of a damaged file, or one an own set overtakes).
        defer { store.didTell(self) }
        guard isCleared || !changedKeys.isEmpty else { return }
        if holdsPeerClear {
            ClearTestHooks.installed.run(.caughtUpWithPeerClear, for: store)
        } else {
            ClearTestHooks.installed.run(.caughtUpWithPeerChanges, for: store)
        }
        var news = self
        news.peers = store.observers(except: nil)
        news.deliver()
    }
}
