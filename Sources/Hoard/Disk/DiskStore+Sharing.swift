import Foundation

extension DiskStore {
    private struct WeakStore {
        weak var store: DiskStore?
    }

    private static let openStores = Locked<[String: WeakStore]>([:])

    /// Returns the store already open on this container in this process, or opens one.
    ///
    /// Two stores on one folder would overwrite each other's index and miss each other's pending
    /// writes, so a process keeps one per folder, found by the folder's real path (symbolic links
    /// resolved once the folder exists).
    ///
    /// - Throws: ``CacheError`` with code `invalidConfiguration` when the container is already open
    ///   with another count limit, byte limit, eviction policy or schema version (one store cannot keep
    ///   two limits), with code `containerInUse` when another process has it open (see
    ///   ``ContainerLock``), or with code `io` when the container cannot be created.
    static func shared(at url: URL, options: Options) throws -> DiskStore {
        let path = try Directory.create(at: url)
        let options = options.normalized
        var messages = DeferredLog()
        defer { messages.flush() }
        return try openStores.withLock { stores in
            stores = stores.filter { $0.value.store != nil }
            if let store = stores[path]?.store {
                guard store.options == options else {
                    throw CacheError.invalidConfiguration(
                        "The container \(path) is already open in this process with maxDiskCount "
                            + "\(store.options.capacity), byte limit \(Self.describe(store.options.byteLimit)), "
                            + "evictionPolicy \(store.options.policy) and schema version "
                            + "\(store.options.schemaVersion); open it with the same settings (asked: "
                            + "\(options.capacity), \(Self.describe(options.byteLimit)), \(options.policy), "
                            + "\(options.schemaVersion))."
                    )
                }
                return store
            }
            let store = try DiskStore(
                at: URL(fileURLWithPath: path, isDirectory: true),
                options: options,
                log: &messages
            )
            stores[path] = WeakStore(store: store)
            return store
        }
    }

    private static func describe(_ byteLimit: Int?) -> String { byteLimit.map(String.init) ?? "none" }

    // MARK: - The caches sharing the store

    /// The caches registered on this store, except `origin`.
    func observers(except origin: (any DiskStoreObserver)?) -> [any DiskStoreObserver] {
        withState { $0.observers(except: origin) }
    }

    /// Registers a cache to hear of changes that other caches make to this container.
    func addObserver(_ observer: any DiskStoreObserver) {
        withState { $0.observers[ObjectIdentifier(observer)] = WeakObserver(observer: observer) }
    }

    /// Stops telling a cache of changes.
    func removeObserver(_ observer: any DiskStoreObserver) {
        withState { $0.observers[ObjectIdentifier(observer)] = nil }
    }
}
