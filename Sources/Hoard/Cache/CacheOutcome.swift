/// What one call into a cache's engine did, for its reporter to tell the world.
///
/// The engine (``CacheEngine``) changes the levels and returns one of these; it never calls a
/// delegate, emits an event, counts a statistic or tells another cache. The reporter
/// (``CacheReporter``) then delivers all of it at once, after every lock is released, in a fixed
/// order: disk evictions, the set, memory evictions, the read's hit or miss, the removal, the store
/// failure; the caches that share the container hear last.
@usableFromInline
struct CacheOutcome<Value: Sendable>: Sendable {
    /// A value a level removed on its own, and why.
    @usableFromInline typealias Eviction = (key: String, value: Value, reason: EvictionReason)

    /// What a read found.
    @usableFromInline
    enum Read: Sendable {
        case hit(StorageLevel)
        case miss
    }

    /// The key the call was about.
    @usableFromInline var key: String
    /// What the read found, when the call was a read.
    @usableFromInline var read: Read?
    /// The value the call stored, when it stored one (a set event).
    @usableFromInline var stored: Value?
    /// Whether the call removed the key on request (a removal event).
    @usableFromInline var isRemoval = false
    /// Values memory removed on its own, to make room or because they expired.
    @usableFromInline var memoryEvictions: [Eviction] = []
    /// Entries disk removed on its own (expired entries a read met).
    @usableFromInline var diskEvictions: [(key: String, reason: EvictionReason)] = []
    /// A value that could not be kept (the serializer failed).
    @usableFromInline var storeFailure: CacheError?
    /// What the other caches on the container must hear, and which they are.
    @usableFromInline var peerNews = PeerNews()

    @inlinable
    init(key: String) {
        self.key = key
    }

    /// An outcome that read, and maybe copied into memory (evicting `memoryEvictions`).
    @inlinable
    init(key: String, read: Read?, memoryEvictions: [Eviction]) {
        self.key = key
        self.read = read
        self.memoryEvictions = memoryEvictions
    }

    /// Whether the call did nothing but read: no value stored, removed or evicted, nothing failed,
    /// and no other cache must hear of it.
    @inlinable
    var isOnlyARead: Bool {
        diskEvictions.isEmpty && memoryEvictions.isEmpty && stored == nil && !isRemoval && storeFailure == nil
            && peerNews.peers.isEmpty
    }

    /// Takes in what a later step of the same call did.
    mutating func merge(_ other: CacheOutcome) {
        read = other.read ?? read
        stored = other.stored ?? stored
        isRemoval = isRemoval || other.isRemoval
        memoryEvictions += other.memoryEvictions
        diskEvictions += other.diskEvictions
        storeFailure = other.storeFailure ?? storeFailure
        if !other.peerNews.peers.isEmpty { peerNews = other.peerNews }
    }

    /// Notes what the other caches on the container must hear of a change to ``key`` (as the disk
    /// store returned it when the change was queued).
    @usableFromInline
    mutating func tell(_ news: PeerNews) {
        guard !news.peers.isEmpty else { return }
        peerNews = news
    }
}
