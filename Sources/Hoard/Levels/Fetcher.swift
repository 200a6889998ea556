/// A level that only produces values, such as a network client: only ``CacheLevel/get(_:)`` needs
/// writing.
///
/// The other requirements have default implementations that do nothing, so a fetcher can sit at the
/// bottom of a composition (`memory.compose(disk).compose(fetcher)`) where sets, removals and clears
/// reach every level:
/// ```swift
/// struct UserFetcher: Fetcher {
///     func get(_ key: String) async throws -> User { try await api.user(id: key) }
/// }
/// ```
public protocol Fetcher<Key, Value>: CacheLevel {}

extension Fetcher {
    /// Does nothing: a fetcher stores nothing.
    ///
    /// - Parameters:
    ///   - value: Ignored.
    ///   - key: Ignored.
    /// - Throws: Never.
    public func set(_ value: Value, forKey key: Key) async throws {}

    /// Does nothing: a fetcher stores nothing.
    ///
    /// - Parameter key: Ignored.
    /// - Throws: Never.
    public func removeValue(forKey key: Key) async throws {}

    /// Does nothing: a fetcher stores nothing.
    public func clear() async {}

    /// Does nothing: a fetcher keeps nothing in memory.
    public func onMemoryWarning() {}
}
