import Foundation

/// Configures and builds a ``Cache``.
///
/// ```swift
/// let users = try CacheBuilder<User>()          // Codable values: JSON by default
///     .containerName("users")                   // required: the cache's folder inside `directory`
///     .maxRamCount(100)                         // objects kept in memory (0 turns memory off)
///     .maxDiskCount(1_000)                      // objects kept on disk (0 turns disk off)
///     .evictionPolicy(.wTinyLFU)                // the default; .lru and .lfu on request
///     .fetcher { id in try await api.user(id: id) }
///     .maxRetryCount(3)
///     .delegate(observer)                       // held weakly
///     .build()
/// ```
/// Each option returns a new builder, so a builder can be kept and varied. Nothing is checked until
/// ``build()``.
public struct CacheBuilder<Value: Sendable>: Sendable {
    struct WeakDelegate: Sendable {
        weak var delegate: (any CacheDelegate<Value>)?
        /// A forwarder to a main-actor delegate, which the cache keeps alive.
        var retained: (any CacheDelegate<Value>)?
    }

    var containerName: String?
    var directory: URL?
    var maxRamCount = 100
    var maxDiskCount = 1_000
    var evictionPolicy = EvictionPolicy.wTinyLFU
    var serializer: any CacheSerializer<Value>
    var fetcher: (@Sendable (String) async throws -> Value)?
    var maxRetryCount = 0
    var retryBackoff = RetryBackoff.none
    var maxDiskBytes: Int?
    var version = 0
    var expiry = CacheExpiry.never
    var clock: @Sendable () -> Date = { Date() }
    var servesStaleOnFetchFailure = false
    var maxRamCost: Int?
    var maxRamEntryShare = 0.25
    var delegateBox = WeakDelegate()
    var isTemporary = false
    var fileProtection: FileProtectionType?
    var isExclusiveProcess = false
    var sharedLevel: (any CacheLevel<String, Data>)?
    var coherence: CacheCoherence?
    var singleFetch: SingleFetch?

    /// Starts a builder for `Codable` values, stored as JSON by ``CodableSerializer``.
    public init() where Value: Codable {
        serializer = CodableSerializer<Value>()
    }

    /// Starts a builder whose values are stored by `serializer`.
    public init(serializer: some CacheSerializer<Value>) {
        self.serializer = serializer
    }

    /// The default folder that holds containers: `<app>/Hoard` inside the platform's caches folder,
    /// where `<app>` is the main bundle's identifier, or the executable's name when there is none.
    ///
    /// - Apple platforms: `~/Library/Caches/<bundle identifier>/Hoard`, as Apple's guidelines ask of
    ///   every program that writes to `Caches` (outside the sandbox, `~/Library/Caches` is shared by
    ///   every app and tool of the user, so two programs' containers named "users" would otherwise be
    ///   one container).
    /// - Linux: `$XDG_CACHE_HOME/<executable>/Hoard`, or `~/.cache/<executable>/Hoard`.
    ///
    /// To share containers between programs (an app and its extensions in an App Group, several
    /// workers of one service), give each the same ``directory(_:)``.
    public static var defaultDirectory: URL {
        let caches =
            FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first
            ?? FileManager.default.temporaryDirectory
        return caches.appendingPathComponent(applicationFolderName, isDirectory: true)
            .appendingPathComponent("Hoard", isDirectory: true)
    }

    /// The name of this program's folder in the caches folder: its bundle identifier or executable
    /// name, made a plain folder name.
    static var applicationFolderName: String {
        let name = Bundle.main.bundleIdentifier ?? ProcessInfo.processInfo.processName
        let plain = name.replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "\0", with: "_")
        return plain.isEmpty || plain == "." || plain == ".." ? "Hoard-program" : plain
    }

    /// Sets the name of the cache's folder inside ``directory(_:)``; required unless the disk level
    /// is off (``maxDiskCount(_:)`` 0).
    ///
    /// The name must contain something other than white space, and must not contain `/`, `..` or a
    /// NUL character.
    public func containerName(_ name: String) -> Self { with { $0.containerName = name } }

    /// Sets the folder that holds the container; default ``defaultDirectory``.
    public func directory(_ url: URL) -> Self { with { $0.directory = url } }

    /// Puts each cache this builder builds in a fresh folder of the system's temporary directory,
    /// removed with everything in it when the last cache on it is released (and its writes have
    /// landed).
    ///
    /// For your own unit tests, and for scratch caches: no ``containerName(_:)`` or
    /// ``directory(_:)`` is needed, and no test sees another's entries.
    /// ```swift
    /// let cache = try CacheBuilder<String>(serializer: StringSerializer()).temporaryContainer().build()
    /// ```
    /// It replaces ``directory(_:)``; a ``containerName(_:)`` given is the folder's name inside it.
    public func temporaryContainer() -> Self { with { $0.isTemporary = true } }

    /// Sets the data-protection class of the container's files on iOS, tvOS, watchOS and visionOS
    /// (default: the app's default class); does nothing on macOS and Linux.
    ///
    /// It takes Foundation's `FileProtectionType`. The class is set on the container folder when it is
    /// opened, and every file created in it takes the folder's class. For a cache that background work
    /// reads (a widget, a background refresh), `.completeUntilFirstUserAuthentication` keeps it
    /// readable while the device is locked; with `.complete`, a cache read while the device is locked
    /// finds its files unreadable: reads are misses and writes fail, as for any other file-system fault.
    public func fileProtection(_ protection: FileProtectionType) -> Self {
        with { $0.fileProtection = protection }
    }

    /// Sets how many values memory keeps (default 100); 0 turns the memory level off.
    public func maxRamCount(_ count: Int) -> Self { with { $0.maxRamCount = count } }

    /// Sets how many values disk keeps (default 1 000); 0 turns the disk level off.
    public func maxDiskCount(_ count: Int) -> Self { with { $0.maxDiskCount = count } }

    /// Sets which value a full level removes, in memory and on disk (default
    /// ``EvictionPolicy/wTinyLFU``, which adapts to the workload).
    public func evictionPolicy(_ policy: EvictionPolicy) -> Self { with { $0.evictionPolicy = policy } }

    /// Replaces the serializer that turns values into bytes for disk.
    public func serializer(_ serializer: some CacheSerializer<Value>) -> Self { with { $0.serializer = serializer } }

    /// Sets the function that produces a value the cache does not hold, for ``Cache/getOrFetch(forKey:)``.
    public func fetcher(_ fetch: @escaping @Sendable (_ key: String) async throws -> Value) -> Self {
        with { $0.fetcher = fetch }
    }

    /// Sets a level that produces the values the cache does not hold: its `get` is the fetcher.
    ///
    /// ```swift
    /// let articles = try CacheBuilder<Article>()
    ///     .containerName("articles")
    ///     .fetcher(NetworkFetcher().transformValues(jsonToArticle))
    ///     .build()
    /// ```
    /// Only `get` is called: the cache stores what it fetches in its own levels.
    public func fetcher(_ level: some CacheLevel<String, Value>) -> Self {
        with { $0.fetcher = { key in try await level.get(key) } }
    }

    /// Puts a level shared by several processes or machines (a Redis server, say) under the
    /// disk level: a read is memory → disk → shared level → fetcher.
    ///
    /// ```swift
    /// let users = try CacheBuilder<User>()
    ///     .containerName("users")
    ///     .sharedLevel(try RedisCacheLevel(url: "redis://127.0.0.1:6379/0", namespace: "users"))
    ///     .fetcher { id in try await api.user(id: id) }
    ///     .build()
    /// ```
    /// - A shared-level hit fills disk and memory; a fetched value goes to every level.
    /// - `set`, `removeValue` and `removeAll` reach the shared level in the background, in order per
    ///   key; ``Cache/save(_:forKey:)`` waits for it too, and ``Cache/flush()`` waits for the writes
    ///   queued before it.
    /// - The value is stored as the cache's serializer makes it, inside the same checksummed
    ///   envelope as on disk, with its expiry: a value of another type or version, a damaged one, or
    ///   an expired one is a miss.
    /// - A level that fails (a server down, a timeout) is a miss: the fetcher serves, and the
    ///   failure is counted in ``CacheStatistics/sharedErrors`` and logged. A `RedisCacheLevel` whose
    ///   login or database can never work (a wrong password) makes `build()` throw instead, with the
    ///   server's words; `build()` waits for its first answer for that.
    /// - Concurrent misses for one key in one process share one shared-level read and at most one
    ///   fetch. Other processes that miss it meanwhile fetch it too, unless
    ///   ``fleetSingleFetch(leaseDuration:waitLimit:)`` is on.
    /// - The subscript and ``Cache/value(forKey:)`` are synchronous: they read memory and disk only.
    /// - Pass the `RedisCacheLevel` itself, not a level made from it (`transformKeys(_:)`,
    ///   `transformValues(_:)`, `compose(_:)`, `pooled()`): such a level is a plain `get`/`set`, so
    ///   values reach the server without their time to live (kept until the level's `defaultTTL`,
    ///   or for ever; still a miss once expired), reads go one key at a time, and `build()` refuses
    ///   it with `coherence(.invalidations)` or `fleetSingleFetch`. Its `namespace` prefixes the keys.
    public func sharedLevel(_ level: some CacheLevel<String, Data>) -> Self { with { $0.sharedLevel = level } }

    /// Sets whether this process keeps every other process out of the container while the cache is
    /// open (default `false`).
    ///
    /// By default several processes may open one container at once (an app and its extensions in an
    /// App Group, the workers of one service): each change to the container's files takes a file
    /// lock for the moment it lasts, and none is held while the cache is idle. With `true`, the
    /// cache also holds a lock for its whole life, and opening the container in another process
    /// throws ``CacheError/containerInUse`` (as does opening it here while another process holds it
    /// open). A process that did not ask for exclusivity holds no lock while idle, so it cannot be
    /// seen: exclusivity holds only when every process on the container asks for it. Do not use it in
    /// an iOS app whose container is shared: iOS terminates a suspended app that holds a file lock
    /// there.
    public func exclusiveProcess(_ on: Bool) -> Self { with { $0.isExclusiveProcess = on } }

    /// Sets how many times a failed fetch is retried after the first attempt (default 0).
    public func maxRetryCount(_ count: Int) -> Self { with { $0.maxRetryCount = count } }

    /// Sets the wait between fetch attempts (default ``RetryBackoff/none``).
    public func retryBackoff(_ backoff: RetryBackoff) -> Self { with { $0.retryBackoff = backoff } }

    /// Sets the most bytes the container's files on disk may take together (default: no byte limit).
    ///
    /// Every file counts: the entry files, and the container's own index (with its journal),
    /// manifest and lock file. Whenever ``Cache/flush()`` returns, their sizes add up to at most
    /// `bytes`: every write evicts, in policy order, until both the count and the byte limit hold,
    /// leaving room for the index (52 bytes per entry, plus a journal of at most 1/16 of the limit,
    /// between 512 bytes and 64 KiB, folded into a new snapshot whenever it grows past that). A value
    /// whose entry file alone would not fit beside those files is not written to disk (it stays in
    /// memory).
    public func maxDiskBytes(_ bytes: Int) -> Self { with { $0.maxDiskBytes = bytes } }

    /// Sets the schema version of the values (default 0); bump it when the model changes.
    ///
    /// Every entry file records the version it was written under. Entries written under another
    /// version are misses and are removed, so a changed model never meets bytes it cannot decode,
    /// and no migration code is needed: the cache refills from the fetcher.
    public func version(_ version: Int) -> Self { with { $0.version = version } }

    /// Sets how long values stay fresh when they are set without an expiry (default
    /// ``CacheExpiry/never``).
    ///
    /// An expired value is never returned by the subscript, ``Cache/value(forKey:)`` or a level's
    /// `get`, and ``Cache/getOrFetch(forKey:)`` fetches it again. The expiry date is stored with
    /// the entry on both levels and survives a restart. Override it per entry with
    /// ``Cache/set(_:forKey:expiry:)``.
    public func expiry(_ expiry: CacheExpiry) -> Self { with { $0.expiry = expiry } }

    /// Sets where "now" comes from (default `{ Date() }`); every expiry decision reads it.
    ///
    /// Tests inject a clock they move by hand (a lock-protected `Date` they advance), so that nothing
    /// sleeps. The clock is called from any thread, only for values that have an expiry date, and
    /// must be fast.
    public func clock(_ now: @escaping @Sendable () -> Date) -> Self { with { $0.clock = now } }

    /// Sets whether a failed fetch returns the expired value instead of failing (default `false`).
    ///
    /// When on, reads keep expired values (still misses) instead of removing them, so that a fetch
    /// that fails after every attempt can return one; the caller can tell through
    /// ``Cache/entry(forKey:)`` (``CacheEntry/isExpired``) or the ``CacheEvent/servedStale(key:value:expiredAt:)``
    /// event. Expired values then leave when replaced, evicted, or swept by ``Cache/removeExpired()``.
    /// A stale value comes before the delegate's fallback.
    public func serveStaleOnFetchFailure(_ serves: Bool) -> Self { with { $0.servesStaleOnFetchFailure = serves } }

    /// Sets the most bytes the values in memory may take together, measured as their serialized size
    /// (default: no cost limit, only ``maxRamCount(_:)``).
    ///
    /// Every set then serializes the value on the caller's thread (the bytes are reused for the disk
    /// write) and evicts, in policy order, until both the count and the cost limit hold. A value
    /// costing more than ``maxRamEntryShare(_:)`` of the budget is not kept in memory (it still goes
    /// to disk), so that one large value cannot flush every other.
    public func maxRamCost(_ bytes: Int) -> Self { with { $0.maxRamCost = bytes } }

    /// Sets the largest share of ``maxRamCost(_:)`` one value may take in memory (default 0.25, a
    /// quarter of the budget); between 0 (exclusive) and 1.
    public func maxRamEntryShare(_ share: Double) -> Self { with { $0.maxRamEntryShare = share } }

    /// Sets the delegate, held weakly.
    public func delegate(_ delegate: any CacheDelegate<Value>) -> Self {
        with { $0.delegateBox = WeakDelegate(delegate: delegate) }
    }

    /// Sets a delegate told on the main actor, held weakly; it replaces ``delegate(_:)``.
    ///
    /// See ``MainActorCacheDelegate``.
    public func mainActorDelegate(_ delegate: some MainActorCacheDelegate<Value>) -> Self {
        let forwarder = MainActorDelegateForwarder(delegate)
        return with { $0.delegateBox = WeakDelegate(delegate: forwarder, retained: forwarder) }
    }

    private func with(_ change: (inout Self) -> Void) -> Self {
        var copy = self
        change(&copy)
        return copy
    }

    /// The folder of the container, once the configuration is valid.
    func containerURL() throws(CacheError) -> URL {
        guard let name = containerName else {
            throw .invalidConfiguration(
                "containerName is required when the disk level is on: call .containerName(\"…\") before "
                    + "build(), or turn the disk level off with .maxDiskCount(0)."
            )
        }
        try Self.checkContainerName(name, option: "containerName")
        return (directory ?? Self.defaultDirectory).appendingPathComponent(name, isDirectory: true)
    }

    /// Checks that `name` can name a container folder: not empty, not only white space, no `/`,
    /// `..` or NUL.
    ///
    /// - Throws: ``CacheError`` with code `invalidConfiguration`, naming `option`.
    static func checkContainerName(_ name: String, option: String) throws(CacheError) {
        guard !name.isEmpty else { throw .invalidConfiguration("\(option) must not be empty.") }
        guard name.contains(where: { !$0.isWhitespace }) else {
            throw .invalidConfiguration("\(option) must not be only white space (it is \"\(name)\").")
        }
        // By bytes, not characters: `"/\u{301}"` is one character that is not `"/"`, yet its bytes
        // hold the slash the file system splits the path at.
        let bytes = Array(name.utf8)
        let hasDotDot = zip(bytes, bytes.dropFirst()).contains { $0 == UInt8(ascii: ".") && $1 == UInt8(ascii: ".") }
        guard !bytes.contains(UInt8(ascii: "/")), !hasDotDot, !bytes.contains(0), name != "." else {
            throw .invalidConfiguration(
                "\(option) \"\(name)\" must be a plain folder name: no \"/\", \"..\" or NUL character."
            )
        }
    }

    /// Checks the configuration, creates the container folder and opens the cache.
    ///
    /// - Returns: A cache ready to use, holding whatever an earlier cache left in the container.
    /// - Throws: ``CacheError`` with code `invalidConfiguration` naming the bad option (a missing,
    ///   empty or path-like container name, a negative count), or with code `io` when the container
    ///   cannot be created or read.
    public func build() throws -> Cache<Value> {
        try build(sharingStore: true)
    }

    /// Builds the cache; with `sharingStore` false, opens a disk store of its own even when one is
    /// open on the container, as a new process would (tests use it to check what survives a restart).
    func build(sharingStore: Bool) throws -> Cache<Value> {
        // A memory-only cache needs no container; a name given is still checked.
        var temporaryRoot: URL?
        var builder = self
        if isTemporary && maxDiskCount != 0 {
            let root = FileManager.default.temporaryDirectory
                .appendingPathComponent("Hoard-\(UUID().uuidString)", isDirectory: true)
            builder.directory = root
            builder.containerName = containerName ?? "cache"
            temporaryRoot = root
        }
        let url = maxDiskCount != 0 || containerName != nil ? try builder.containerURL() : nil
        guard maxRamCount >= 0 else {
            throw CacheError.invalidConfiguration("maxRamCount must be 0 or more, not \(maxRamCount).")
        }
        guard maxDiskCount >= 0 else {
            throw CacheError.invalidConfiguration("maxDiskCount must be 0 or more, not \(maxDiskCount).")
        }
        if let maxDiskBytes, maxDiskBytes < 0 {
            throw CacheError.invalidConfiguration("maxDiskBytes must be 0 or more, not \(maxDiskBytes).")
        }
        guard let schemaVersion = UInt32(exactly: version) else {
            throw CacheError.invalidConfiguration("version must be between 0 and \(UInt32.max), not \(version).")
        }
        guard maxRetryCount >= 0 else {
            throw CacheError.invalidConfiguration("maxRetryCount must be 0 or more, not \(maxRetryCount).")
        }
        if let maxRamCost, maxRamCost < 0 {
            throw CacheError.invalidConfiguration("maxRamCost must be 0 or more, not \(maxRamCost).")
        }
        guard maxRamEntryShare > 0, maxRamEntryShare <= 1 else {
            throw CacheError.invalidConfiguration(
                "maxRamEntryShare must be above 0 and at most 1, not \(maxRamEntryShare)."
            )
        }
        switch expiry.kind {
        case .seconds(let seconds) where seconds.isNaN || seconds <= 0:
            throw CacheError.invalidConfiguration(
                "expiry must be more than 0 seconds, not \(seconds): a value that expires as it is stored "
                    + "would never be served (use .never for values that do not expire)."
            )
        case .date(let date) where date.timeIntervalSince1970.isNaN:
            throw CacheError.invalidConfiguration("expiry must be a valid date.")
        default:
            break
        }
        // Before the disk opens: a level that can never work fails the build, not every read.
        try checkCoherence()
        try checkSingleFetch()
        if let checking = sharedLevel as? any ConfigurationCheckingLevel { try checking.checkConfiguration() }
        let memory =
            maxRamCount > 0
            ? MemoryStore<String, CachedValue<Value>>(
                capacity: maxRamCount,
                policy: evictionPolicy,
                sharded: maxRamCost == nil
            ) : nil
        var disk: DiskStore?
        if maxDiskCount > 0, let url {
            let options = DiskStore.Options(
                capacity: maxDiskCount,
                policy: evictionPolicy,
                schemaVersion: schemaVersion,
                byteLimit: maxDiskBytes,
                limitsOwnFiles: true,
                contents: ContainerContents(Value.self, serializer: serializer),
                removedWhenClosed: temporaryRoot,
                fileProtection: fileProtection?.rawValue,
                exclusiveProcess: isExclusiveProcess
            )
            disk =
                sharingStore
                ? try DiskStore.shared(at: url, options: options) : try DiskStore(at: url, options: options)
        }
        let cache = Cache(configuration: self, memory: memory, disk: disk)
        try subscribeToInvalidations(cache)
        return cache
    }
}
