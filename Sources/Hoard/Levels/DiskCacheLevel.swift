import Foundation

/// A cache level on disk: one file per value in a folder, with a count limit and an optional byte limit.
///
/// It runs on the same engine as the disk level of ``Cache``: file names are a hash of the key, writes
/// go to a temporary file renamed into place by a background writer, and a value that was set is
/// readable at once. Levels and caches opened on one folder in one process share one store. Keys are
/// `String`s, or `URL`s (stored by their `absoluteString`: two URLs with one `absoluteString` are one
/// key, for a batch set or ``CacheLevel/pooled()`` over the level too).
///
/// Opening never throws: when the folder cannot be used, ``get(_:)`` and ``set(_:forKey:)`` throw the
/// error met while opening it.
///
/// With a byte limit, the entry files (each holds its key, the serialized value and a small header)
/// take at most that many bytes together once ``flush()`` returns: each write evicts values in the
/// order of ``EvictionPolicy/wTinyLFU`` (a ``Cache``'s default), never the value just written, until
/// both limits hold. A value whose entry file alone is larger than the limit is not kept (it evicts
/// nothing, and an older value for its key is removed).
///
/// ```swift
/// let disk = DiskCacheLevel<String, User>(directory: folder, capacity: 1_000)
/// try await disk.set(user, forKey: "42")
/// await disk.flush()   // waits until every write is on disk
/// ```
public final class DiskCacheLevel<Key: Sendable, Value: Sendable>: CacheLevel, Sendable {
    private let store: Result<DiskStore, CacheError>
    private let keyString: @Sendable (Key) -> String
    private let serialize: @Sendable (Value) throws -> Data
    private let deserialize: @Sendable (Data) throws -> Value
    /// Where "now" comes from, to tell expired entries (written by a ``Cache`` on the folder).
    private let clock: @Sendable () -> Date

    private init(
        directory: Result<URL, CacheError>,
        capacity: Int,
        byteLimit: Int?,
        serializer: some CacheSerializer<Value>,
        clock: @escaping @Sendable () -> Date,
        keyString: @escaping @Sendable (Key) -> String
    ) {
        precondition(capacity >= 0, "DiskCacheLevel capacity must be 0 or more, not \(capacity).")
        if let byteLimit {
            precondition(byteLimit >= 0, "DiskCacheLevel byteLimit must be 0 or more, not \(byteLimit).")
        }
        let options = DiskStore.Options(
            capacity: capacity,
            // A Cache's default, so that both open one container with the same settings.
            policy: .wTinyLFU,
            byteLimit: byteLimit,
            contents: ContainerContents(Value.self, serializer: serializer)
        )
        store = directory.flatMap { directory in
            do {
                return .success(try DiskStore.shared(at: directory, options: options))
            } catch let error as CacheError {
                return .failure(error)
            } catch {
                return .failure(CacheError.io("Cannot open the folder \(directory.path).", underlying: error))
            }
        }
        if case .success(let store) = store { store.addLevelUser() }
        if case .failure(let error) = store {
            let place = (try? directory.get().path) ?? "(no folder)"
            HoardLogger.log(.error, "The disk cache level at \(place) is unusable: \(error)")
        }
        self.keyString = keyString
        self.clock = clock
        self.serialize = { value in try serializer.serialize(value) }
        self.deserialize = { data in try serializer.deserialize(data) }
    }

    /// Opens a level on a folder: the body of the public initializers on a folder, for `String` and
    /// `URL` keys alike.
    private convenience init(
        folder: URL,
        capacity: Int,
        byteLimit: Int?,
        serializer: some CacheSerializer<Value>,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) where Key: DiskLevelKey {
        self.init(
            directory: .success(folder),
            capacity: capacity,
            byteLimit: byteLimit,
            serializer: serializer,
            clock: clock,
            keyString: Key.diskLevelString
        )
    }

    deinit {
        if case .success(let store) = store { store.removeLevelUser() }
    }

    /// Opens a level on a folder with `String` keys, creating the folder if needed.
    ///
    /// - Parameters:
    ///   - directory: The folder holding the level's files; it should hold nothing else.
    ///   - capacity: The most values kept; 0 keeps 1.
    ///   - byteLimit: The most bytes the level's entry files take together; `nil` for no limit.
    ///   - serializer: Turns values into bytes and back.
    ///   - clock: Where "now" comes from, to tell expired entries (a ``Cache`` on the same folder
    ///     writes entries that expire); tests inject their own.
    /// - Precondition: `capacity` is 0 or more, and `byteLimit`, when given, is 0 or more; otherwise
    ///   the program stops with a message naming the value (see "Bad arguments" in the README).
    public convenience init(
        directory: URL,
        capacity: Int,
        byteLimit: Int? = nil,
        serializer: some CacheSerializer<Value>,
        clock: @escaping @Sendable () -> Date
    ) where Key == String {
        self.init(folder: directory, capacity: capacity, byteLimit: byteLimit, serializer: serializer, clock: clock)
    }

    /// Opens a level on a folder with `String` keys and `Codable` values, stored as JSON.
    ///
    /// - Parameters:
    ///   - directory: The folder holding the level's files; it should hold nothing else.
    ///   - capacity: The most values kept; 0 keeps 1.
    /// - Precondition: `capacity` is 0 or more; otherwise the program stops with a message naming
    ///   the value (see "Bad arguments" in the README).
    public convenience init(directory: URL, capacity: Int) where Key == String, Value: Codable {
        self.init(folder: directory, capacity: capacity, byteLimit: nil, serializer: CodableSerializer<Value>())
    }

    /// Opens a level on a folder with `String` keys, telling expired entries by the system clock.
    ///
    /// - Parameters:
    ///   - directory: The folder holding the level's files; it should hold nothing else.
    ///   - capacity: The most values kept; 0 keeps 1.
    ///   - byteLimit: The most bytes the level's entry files take together; `nil` for no limit.
    ///   - serializer: Turns values into bytes and back.
    /// - Precondition: `capacity` is 0 or more, and `byteLimit`, when given, is 0 or more; otherwise
    ///   the program stops with a message naming the value (see "Bad arguments" in the README).
    public convenience init(
        directory: URL,
        capacity: Int,
        byteLimit: Int? = nil,
        serializer: some CacheSerializer<Value>
    ) where Key == String {
        self.init(folder: directory, capacity: capacity, byteLimit: byteLimit, serializer: serializer)
    }

    /// Opens a level on a container of ``CacheBuilder/defaultDirectory``, with `String` keys.
    ///
    /// ```swift
    /// let articles = MemoryCacheLevel<String, Article>()
    ///     .compose(DiskCacheLevel(named: "articles"))
    ///     .compose(ArticleFetcher())
    /// ```
    /// A name that cannot name a folder (empty, only white space, with `/`, `..` or NUL) makes the
    /// level unusable: its `get` and `set` throw ``CacheError`` with code `invalidConfiguration`.
    ///
    /// - Parameters:
    ///   - name: The container's folder name inside the default directory.
    ///   - capacity: The most values kept (default 1 000).
    ///   - byteLimit: The most bytes the level's entry files take together; `nil` for no limit.
    ///   - serializer: Turns values into bytes and back.
    /// - Precondition: `capacity` is 0 or more, and `byteLimit`, when given, is 0 or more; otherwise
    ///   the program stops with a message naming the value (see "Bad arguments" in the README).
    public convenience init(
        named name: String,
        capacity: Int = 1_000,
        byteLimit: Int? = nil,
        serializer: some CacheSerializer<Value>
    ) where Key == String {
        self.init(
            directory: Result { () throws(CacheError) in
                try CacheBuilder<Value>.checkContainerName(name, option: "The container name")
                return CacheBuilder<Value>.defaultDirectory.appendingPathComponent(name, isDirectory: true)
            },
            capacity: capacity,
            byteLimit: byteLimit,
            serializer: serializer,
            clock: { Date() },
            keyString: Key.diskLevelString
        )
    }

    /// Opens a level on a container of ``CacheBuilder/defaultDirectory``, with `String` keys and
    /// `Codable` values, stored as JSON; see ``init(named:capacity:byteLimit:serializer:)``.
    ///
    /// - Parameters:
    ///   - name: The container's folder name inside the default directory.
    ///   - capacity: The most values kept (default 1 000).
    /// - Precondition: `capacity` is 0 or more; otherwise the program stops with a message naming
    ///   the value (see "Bad arguments" in the README).
    public convenience init(named name: String, capacity: Int = 1_000) where Key == String, Value: Codable {
        self.init(named: name, capacity: capacity, serializer: CodableSerializer<Value>())
    }

    /// Opens a level on a folder with `URL` keys, stored by their `absoluteString`.
    ///
    /// - Parameters:
    ///   - directory: The folder holding the level's files; it should hold nothing else.
    ///   - capacity: The most values kept; 0 keeps 1.
    ///   - byteLimit: The most bytes the level's entry files take together; `nil` for no limit.
    ///   - serializer: Turns values into bytes and back.
    ///   - clock: Where "now" comes from, to tell expired entries; tests inject their own.
    /// - Precondition: `capacity` is 0 or more, and `byteLimit`, when given, is 0 or more; otherwise
    ///   the program stops with a message naming the value (see "Bad arguments" in the README).
    public convenience init(
        directory: URL,
        capacity: Int,
        byteLimit: Int? = nil,
        serializer: some CacheSerializer<Value>,
        clock: @escaping @Sendable () -> Date
    ) where Key == URL {
        self.init(folder: directory, capacity: capacity, byteLimit: byteLimit, serializer: serializer, clock: clock)
    }

    /// Opens a level on a folder with `URL` keys and `Codable` values, stored as JSON.
    ///
    /// - Parameters:
    ///   - directory: The folder holding the level's files; it should hold nothing else.
    ///   - capacity: The most values kept; 0 keeps 1.
    /// - Precondition: `capacity` is 0 or more; otherwise the program stops with a message naming
    ///   the value (see "Bad arguments" in the README).
    public convenience init(directory: URL, capacity: Int) where Key == URL, Value: Codable {
        self.init(folder: directory, capacity: capacity, byteLimit: nil, serializer: CodableSerializer<Value>())
    }

    /// Opens a level on a folder with `URL` keys, telling expired entries by the system clock.
    ///
    /// - Parameters:
    ///   - directory: The folder holding the level's files; it should hold nothing else.
    ///   - capacity: The most values kept; 0 keeps 1.
    ///   - byteLimit: The most bytes the level's entry files take together; `nil` for no limit.
    ///   - serializer: Turns values into bytes and back.
    /// - Precondition: `capacity` is 0 or more, and `byteLimit`, when given, is 0 or more; otherwise
    ///   the program stops with a message naming the value (see "Bad arguments" in the README).
    public convenience init(
        directory: URL,
        capacity: Int,
        byteLimit: Int? = nil,
        serializer: some CacheSerializer<Value>
    ) where Key == URL {
        self.init(folder: directory, capacity: capacity, byteLimit: byteLimit, serializer: serializer)
    }

    /// The number of values the level holds: on disk, or set and waiting to be written (less those
    /// removed and waiting to be removed); 0 when the folder is unusable.
    ///
    /// Right after five sets of new keys it is 5, before any file lands. Until ``flush()`` returns
    /// it may exceed the capacity: the writer evicts as each write lands.
    ///
    /// - Complexity: O(p) in the number of writes not landed yet.
    public var count: Int { (try? store.get())?.valueCount ?? 0 }

    /// The total size in bytes of the level's entry files; 0 when the folder is unusable.
    ///
    /// Writes not landed yet are not counted: ``flush()`` first for an exact figure.
    public var byteCount: Int { (try? store.get())?.byteCount ?? 0 }

    /// Returns the value for a key: a pending write, else the file.
    ///
    /// A damaged file, or one the serializer cannot decode, is removed and is a miss.
    ///
    /// - Parameter key: The key to look up.
    /// - Returns: The value.
    /// - Throws: ``CacheError/notFound`` on a miss; the ``CacheError`` met while opening the folder
    ///   when it is unusable.
    /// - Complexity: O(1) and, when the key has a file, one file read on the calling thread.
    public func get(_ key: Key) async throws -> Value {
        let store = try store.get()
        let string = keyString(key)
        let deserialize = deserialize
        let clock = clock
        let read = store.read(DiskKey(string), now: { clock().timeIntervalSince1970 }, deserialize: deserialize)
        switch read {
        case .found(let cached, _):
            return cached.value
        case .miss, .expired:
            throw CacheError.notFound(key: string)
        }
    }

    /// Stores a value: readable at once, written to disk in the background.
    ///
    /// The value is serialized before this returns, so a serializer failure reaches the caller.
    /// A file-system failure of the background write is logged; the value is then a miss.
    ///
    /// - Parameters:
    ///   - value: The value to store.
    ///   - key: The key to store it under.
    /// - Throws: ``CacheError`` with code `serializationFailed`; the error met while opening the folder.
    public func set(_ value: Value, forKey key: Key) async throws {
        let store = try store.get()
        let string = keyString(key)
        let data: Data
        do {
            data = try serialize(value)
        } catch {
            throw CacheError.serializationFailed(key: string, underlying: error)
        }
        let pending = PendingValue(value: value, serialize: { data }, expiresAt: .never)
        store.enqueueWrite(DiskKey(string), value: pending, observer: nil).deliver()
    }

    /// Removes the value for a key: a miss at once, the file goes in the background.
    ///
    /// - Parameter key: The key to remove.
    /// - Throws: The error met while opening the folder.
    public func removeValue(forKey key: Key) async throws {
        let store = try store.get()
        let string = keyString(key)
        store.enqueueRemove(DiskKey(string), observer: nil).deliver()
    }

    /// Removes every value and file; does nothing when the folder is unusable.
    ///
    /// - Complexity: O(n) file removals, on the calling thread.
    public func clear() async {
        clearOnThisThread()
    }

    /// The body of ``clear()``, which waits for nothing.
    ///
    /// The caches on the container keep no fill from before the files are removed until they hear
    /// of the clear, as for a cache's own clear: a fetch that answered in between would write its
    /// value back.
    func clearOnThisThread() {
        guard case .success(let store) = store else { return }
        let (clear, caches) = store.beginClear(by: nil)
        for cache in caches { cache.diskStoreWillClear() }
        store.removeAll()
        ClearTestHooks.installed.run(.clearedDisk, for: self)
        for cache in store.endClear(clear) { cache.diskStoreDidEndClear() }
    }

    /// Does nothing: the disk level keeps no values in memory.
    public func onMemoryWarning() {}

    /// Waits until every write and removal made before the call is on disk.
    ///
    /// For tests and for shutdown.
    public func flush() async {
        guard case .success(let store) = store else { return }
        await store.flush()
    }
}

/// The key types of a ``DiskCacheLevel``, each with the string it is stored by (a key's file name is
/// a hash of it).
protocol DiskLevelKey: Sendable {
    /// The string a key is stored by.
    static var diskLevelString: @Sendable (Self) -> String { get }
}

extension String: DiskLevelKey {
    /// The key itself.
    static var diskLevelString: @Sendable (String) -> String { { $0 } }
}

extension URL: DiskLevelKey {
    /// The URL's `absoluteString`.
    static var diskLevelString: @Sendable (URL) -> String { { $0.absoluteString } }
}

// A `URL` key is stored by its `absoluteString`: two URLs that `==` tells apart (one relative to a
// base, one absolute) may be one key here.
extension DiskCacheLevel: KeyMappingLevel {
    /// The string each key is stored under, for the adapters over the level (a batch set, pooling);
    /// `nil` for `String` keys, which are stored as they are.
    package var mappedKeyIdentity: (@Sendable (Key) async throws -> StoredKey?)? {
        guard Key.self != String.self else { return nil }
        return { [keyString] key in StoredKey(keyString(key)) }
    }
}
