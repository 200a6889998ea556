/// Returns a level that routes each key to one of two levels.
///
/// `get`, `set` and `removeValue` go to the level `switchClosure` picks for the key; `clear` and
/// `onMemoryWarning` reach both.
///
/// ```swift
/// let media = switchLevels(images, videos) { url in
///     url.pathExtension == "mp4" ? .cacheB : .cacheA
/// }
/// ```
/// - Parameters:
///   - cacheA: The level picked by ``CacheLevelSwitchResult/cacheA``.
///   - cacheB: The level picked by ``CacheLevelSwitchResult/cacheB``.
///   - switchClosure: Picks the level of a key.
/// - Returns: The routing level.
public func switchLevels<A: CacheLevel, B: CacheLevel>(
    _ cacheA: A,
    _ cacheB: B,
    switchClosure: @escaping @Sendable (_ key: A.Key) async -> CacheLevelSwitchResult
) -> BasicCache<A.Key, A.Value> where A.Key == B.Key, A.Value == B.Value {
    BasicCache(
        get: { key in
            switch await switchClosure(key) {
            case .cacheA: try await cacheA.get(key)
            case .cacheB: try await cacheB.get(key)
            }
        },
        set: { value, key in
            switch await switchClosure(key) {
            case .cacheA: try await cacheA.set(value, forKey: key)
            case .cacheB: try await cacheB.set(value, forKey: key)
            }
        },
        removeValue: { key in
            switch await switchClosure(key) {
            case .cacheA: try await cacheA.removeValue(forKey: key)
            case .cacheB: try await cacheB.removeValue(forKey: key)
            }
        },
        clear: {
            await cacheA.clear()
            await cacheB.clear()
        },
        onMemoryWarning: {
            cacheA.onMemoryWarning()
            cacheB.onMemoryWarning()
        }
    )
    // Keys one in either level stay related for the adapters over the switch.
    .mappingKeys(by: cacheA.jointKeyMapping(with: cacheB))
}
