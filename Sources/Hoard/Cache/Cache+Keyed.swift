import Foundation

extension Cache {
    /// A view of a ``Cache`` through keys of your own type: the whole cache API, with each key turned
    /// into the cache's `String` key first.
    ///
    /// Make one with ``Cache/keyed(_:)``:
    /// ```swift
    /// struct UserID: Hashable, Sendable { let rawValue: Int }
    ///
    /// let byID = users.keyed { (id: UserID) in "user-\(id.rawValue)" }
    /// byID[UserID(rawValue: 42)] = user
    /// let same = try await byID.getOrFetch(forKey: UserID(rawValue: 42))
    /// ```
    /// The view holds no state of its own: it reads and writes the same memory and disk levels, the
    /// same statistics and events, as the cache it came from (which is ``cache``), and the builder's
    /// fetcher receives the `String` key. Two domain keys that map to one string are one key. The
    /// mapping runs on every call, on the caller's thread, so keep it cheap and pure.
    public struct Keyed<Key: Hashable & Sendable>: Sendable {
        /// The cache this view reads and writes.
        public let cache: Cache<Value>
        /// Turns a domain key into the cache's key.
        public let cacheKey: @Sendable (Key) -> String

        init(cache: Cache<Value>, cacheKey: @escaping @Sendable (Key) -> String) {
            self.cache = cache
            self.cacheKey = cacheKey
        }

        /// The live value for `key`, as the cache's subscript gives it.
        ///
        /// Setting a value stores it with the default expiry; setting `nil` removes it.
        public subscript(key: Key) -> Value? {
            get { cache[cacheKey(key)] }
            nonmutating set { cache[cacheKey(key)] = newValue }
        }

        /// The live value for `key` from memory or disk; see ``Cache/value(forKey:)``.
        public func value(forKey key: Key) -> Value? { cache.value(forKey: cacheKey(key)) }

        /// Stores a value with the default expiry; see ``Cache/set(_:forKey:)``.
        public func set(_ value: Value, forKey key: Key) { cache.set(value, forKey: cacheKey(key)) }

        /// Stores a value that expires as `expiry` says; see ``Cache/set(_:forKey:expiry:)``.
        public func set(_ value: Value, forKey key: Key, expiry: CacheExpiry) {
            cache.set(value, forKey: cacheKey(key), expiry: expiry)
        }

        /// Removes the value for `key` from both levels; see ``Cache/removeValue(forKey:)``.
        public func removeValue(forKey key: Key) { cache.removeValue(forKey: cacheKey(key)) }

        /// Whether either level holds a live value for `key`; see ``Cache/contains(_:)``.
        public func contains(_ key: Key) -> Bool { cache.contains(cacheKey(key)) }

        /// The entry for `key`, expired or not; see ``Cache/entry(forKey:)``.
        public func entry(forKey key: Key) -> CacheEntry<Value>? { cache.entry(forKey: cacheKey(key)) }

        /// The live value for `key` from memory, disk or the fetcher; see ``Cache/getOrFetch(forKey:)``.
        ///
        /// - Throws: The errors of ``Cache/getOrFetch(forKey:)``.
        nonisolated(nonsending) public func getOrFetch(forKey key: Key) async throws -> Value {
            try await cache.getOrFetch(forKey: cacheKey(key))
        }

        /// The same as ``getOrFetch(forKey:)``, blocking the calling thread; see
        /// ``Cache/getOrFetchAndWait(forKey:)``.
        ///
        /// - Throws: The errors of ``Cache/getOrFetch(forKey:)``.
        @available(*, noasync, message: "From async code, use getOrFetch(forKey:).")
        public func getOrFetchAndWait(forKey key: Key) throws -> Value {
            try cache.getOrFetchAndWait(forKey: cacheKey(key))
        }

        /// Stores a value and returns once it is in its file on disk; see ``Cache/save(_:forKey:)``.
        ///
        /// - Throws: The errors of ``Cache/save(_:forKey:)``.
        public func save(_ value: Value, forKey key: Key) async throws {
            try await cache.save(value, forKey: cacheKey(key))
        }

        /// Stores a value that expires as `expiry` says and returns once it is on disk; see
        /// ``Cache/save(_:forKey:expiry:)``.
        ///
        /// - Throws: The errors of ``Cache/save(_:forKey:)``.
        public func save(_ value: Value, forKey key: Key, expiry: CacheExpiry) async throws {
            try await cache.save(value, forKey: cacheKey(key), expiry: expiry)
        }

        /// The same as ``save(_:forKey:)``, blocking the calling thread; see ``Cache/saveAndWait(_:forKey:)``.
        ///
        /// - Throws: The errors of ``Cache/save(_:forKey:)``.
        @available(*, noasync, message: "From async code, use save(_:forKey:).")
        public func saveAndWait(_ value: Value, forKey key: Key) throws {
            try cache.saveAndWait(value, forKey: cacheKey(key))
        }

        /// The same as ``save(_:forKey:expiry:)``, blocking the calling thread; see
        /// ``Cache/saveAndWait(_:forKey:expiry:)``.
        ///
        /// - Throws: The errors of ``Cache/save(_:forKey:)``.
        @available(*, noasync, message: "From async code, use save(_:forKey:expiry:).")
        public func saveAndWait(_ value: Value, forKey key: Key, expiry: CacheExpiry) throws {
            try cache.saveAndWait(value, forKey: cacheKey(key), expiry: expiry)
        }

        /// Stores a value and calls `onComplete` once it is in its file on disk; see
        /// ``Cache/save(_:forKey:onComplete:)``.
        public func save(
            _ value: Value,
            forKey key: Key,
            onComplete: @escaping @Sendable (Result<Void, CacheError>) -> Void
        ) {
            cache.save(value, forKey: cacheKey(key), onComplete: onComplete)
        }

        /// Stores a value that expires as `expiry` says and calls `onComplete` once it is on disk; see
        /// ``Cache/save(_:forKey:expiry:onComplete:)``.
        public func save(
            _ value: Value,
            forKey key: Key,
            expiry: CacheExpiry,
            onComplete: @escaping @Sendable (Result<Void, CacheError>) -> Void
        ) {
            cache.save(value, forKey: cacheKey(key), expiry: expiry, onComplete: onComplete)
        }

        /// Calls `onComplete` with the value for `key` from memory, disk or the fetcher; see
        /// ``Cache/asyncGet(forKey:onComplete:)``.
        public func asyncGet(forKey key: Key, onComplete: @escaping @Sendable (Result<Value, any Error>) -> Void) {
            cache.asyncGet(forKey: cacheKey(key), onComplete: onComplete)
        }
    }

    /// A view of this cache through keys of your own type.
    ///
    /// ```swift
    /// let byID = users.keyed { (id: UserID) in "user-\(id.rawValue)" }
    /// byID[UserID(rawValue: 42)] = user
    /// ```
    /// See ``Cache/Keyed``.
    ///
    /// - Parameter cacheKey: Turns a domain key into this cache's `String` key; it must be pure, and
    ///   two keys that should differ must give two strings.
    /// - Returns: A view over this same cache.
    public func keyed<Key: Hashable & Sendable>(
        _ cacheKey: @escaping @Sendable (Key) -> String
    ) -> Keyed<Key> {
        Keyed(cache: self, cacheKey: cacheKey)
    }
}

// `set(_:forKey:)` and `removeValue(forKey:)` above are the level's too.
extension Cache.Keyed: CacheLevel, KeyMappingLevel {
    /// The cache's key for each domain key: two domain keys that map to one string are one key for
    /// the adapters over the view too (a batch set, pooling).
    package var mappedKeyIdentity: (@Sendable (Key) async throws -> StoredKey?)? {
        { [cacheKey] key in StoredKey(cacheKey(key)) }
    }

    /// The value for `key` from memory, disk or the fetcher: ``getOrFetch(forKey:)`` under the name a
    /// cache level uses.
    ///
    /// - Throws: The errors of ``Cache/getOrFetch(forKey:)``.
    public func get(_ key: Key) async throws -> Value { try await getOrFetch(forKey: key) }

    /// Removes every value of the cache, whatever key type reached it.
    public func clear() async { cache.removeAll() }

    /// Empties the cache's memory level (see ``Cache/onMemoryWarning()``).
    public func onMemoryWarning() { cache.onMemoryWarning() }
}
