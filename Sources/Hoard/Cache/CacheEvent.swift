import Foundation

/// Why a level removed an entry on its own.
///
/// New cases may be added in a minor release: a `switch` over it needs an `@unknown default` case.
public enum EvictionReason: String, Sendable, Hashable, CaseIterable {
    /// The level was at its count limit (`maxRamCount`, `maxDiskCount`).
    case capacity
    /// The level was at its cost or byte limit (`maxRamCost`, `maxDiskBytes`), or the value alone is
    /// too large for it.
    case cost
    /// The entry was expired (see ``CacheExpiry``).
    case expired
    /// The system ran short of memory (``Cache/onMemoryWarning()``).
    case memoryPressure

    /// The reason's position in `allCases`.
    var index: Int {
        switch self {
        case .capacity: 0
        case .cost: 1
        case .expired: 2
        case .memoryPressure: 3
        }
    }
}

/// Something a cache did, delivered to every subscriber of ``Cache/events``.
///
/// Events from one thread arrive in the order they happened; events from different threads may
/// interleave.
///
/// New cases may be added in a minor release: a `switch` over it needs an `@unknown default` case.
public enum CacheEvent<Value: Sendable>: Sendable {
    /// A value was stored (by a set or by a fetch).
    case set(key: String, value: Value)
    /// A read found a live value in a level.
    case hit(key: String, level: StorageLevel)
    /// A read found no live value in either level.
    case miss(key: String)
    /// A level removed an entry on its own.
    case evicted(key: String, level: StorageLevel, reason: EvictionReason)
    /// A fetch failed and the expired value was returned instead (`serveStaleOnFetchFailure`).
    case servedStale(key: String, value: Value, expiredAt: Date)
    /// A value was removed by ``Cache/removeValue(forKey:)``.
    case removed(key: String)
    /// A read of the shared level found nothing usable for `key`.
    case sharedMiss(key: String)
    /// The shared level failed to read or write `key` (a server down, a timeout); a read was served
    /// as a miss.
    case sharedFailure(key: String, error: CacheError)
    /// A level was emptied (``Cache/clearMemory()``, ``Cache/clearDisk()``, ``Cache/removeAll()``).
    case cleared(StorageLevel)

    /// The key the event is about; `nil` for ``cleared(_:)``.
    public var key: String? {
        switch self {
        case .set(let key, _), .hit(let key, _), .miss(let key), .evicted(let key, _, _),
            .servedStale(let key, _, _), .removed(let key), .sharedMiss(let key), .sharedFailure(let key, _):
            key
        case .cleared:
            nil
        }
    }
}

extension CacheEvent: Equatable where Value: Equatable {}
